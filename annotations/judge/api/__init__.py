"""DRF API views of the judge area, one module per screen or resource."""
