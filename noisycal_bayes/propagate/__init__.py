"""Posterior propagation: channel posteriors -> NC-ECE with intervals, reliability curves (DESIGN §4)."""
from .nc_ece import DEFAULT_METHOD, METHODS, TARGETS, PosteriorNCECE, posterior_nc_ece

__all__ = ["DEFAULT_METHOD", "METHODS", "PosteriorNCECE", "TARGETS", "posterior_nc_ece"]
