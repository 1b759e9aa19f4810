"""The Docker fixtures every integration module shares (a real engine, its client, a small test
image)."""

from tests.integration.docker_helpers import docker_client, docker_engine, test_image

__all__ = ["docker_client", "docker_engine", "test_image"]
