"""Where a pytest child runs: this host (``local``) or the row's image (``container``)."""
