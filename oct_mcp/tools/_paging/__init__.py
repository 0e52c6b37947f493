"""Results within the model's budget (private): sizes, cuts, pages and the cursors that resume them."""
