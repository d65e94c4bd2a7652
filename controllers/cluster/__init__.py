"""ValkeyCluster controller: pure rendering of owned objects, observation, planning and acting."""
