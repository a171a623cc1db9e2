"""What runs inside the pytest child: device markers, the disable list, the journal."""
