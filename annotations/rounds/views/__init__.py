"""HTML and htmx views of the rounds area, one module per screen or resource."""
