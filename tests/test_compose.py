"""docker-compose.yml describes a cluster with no shared disk (issue 28). No Docker engine runs
here, so this reads the file and checks what the README promises of it."""

from __future__ import annotations

from pathlib import Path

import yaml

COMPOSE = yaml.safe_load((Path(__file__).resolve().parents[1] / "docker-compose.yml").read_text())
APP = ("migrate", "web", "worker")


def test_every_app_container_keeps_its_files_in_minio_and_none_mounts_a_shared_folder():
    services = COMPOSE["services"]
    for name in APP:
        env = services[name]["environment"]
        assert env["STORAGE_URL"].startswith("s3://mast-studio?endpoint_url=http://minio:9000"), name
        assert "volumes" not in services[name], f"{name} mounts a volume: a second machine could not see it"
        assert env["CACHE_URL"].startswith("redis://") and env["CELERY_BROKER_URL"].startswith("redis://")
    assert "media" not in COMPOSE["volumes"]
    assert "mast-studio" in " ".join(services["minio-bucket"]["command"])


def test_web_goes_through_pgbouncer_in_transaction_mode_and_workers_connect_directly():
    services = COMPOSE["services"]
    web, worker = services["web"]["environment"], services["worker"]["environment"]
    assert "@pgbouncer:" in web["DATABASE_URL"] and web["DATABASE_POOL_MODE"] == "transaction"
    assert services["pgbouncer"]["environment"]["POOL_MODE"] == "transaction"
    assert "@db:" in worker["DATABASE_URL"] and "DATABASE_POOL_MODE" not in worker  # session advisory locks
    assert "jit=off" in services["db"]["command"]  # the option the pooled web cannot send


def test_web_and_workers_scale_without_a_fixed_host_port_clash():
    assert COMPOSE["services"]["web"]["ports"] == ["8000-8009:8000"]
    assert "ports" not in COMPOSE["services"]["worker"]
