"""GL2xx: what happens around replay: kept outputs, rebound or reallocated inputs."""
