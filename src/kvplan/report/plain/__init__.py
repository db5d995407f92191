"""Rich-free text for pipes: tables and lines byte-identical to what rich prints there."""
