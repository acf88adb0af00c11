"""dcoc model zoo."""
