"""HTML and htmx views of the analytics area, one module per screen or resource."""
