"""The settings: read from the environment and TOML, refused with one clear
line when bad, consistent by default."""

from __future__ import annotations

import pytest

from watchdog import BadInput
from watchdog.config import QueueSettings, ServiceSettings, load_all


def test_settings_from_env_and_toml(tmp_path):
    config = tmp_path / "afk.toml"
    config.write_text(
        'reclaim_interval = "30s"\nretention = "7d"\nlease_seconds = 900\nmetrics_agents = 3\n'
    )
    settings = load_all(str(config), env={"AFK_GAUGES_INTERVAL": "5", "AFK_RETENTION": "2d"})
    queue, service = settings.queue, settings.service
    assert queue.lease_seconds == 900
    assert service.reclaim_interval == 30 and service.gauges_interval == 5
    assert service.retention == 2 * 86400  # the env var wins over the file
    assert service.metrics_agents == 3 and service.poison_alert is False


@pytest.mark.parametrize(
    ("env", "toml", "message"),
    [
        ({"AFK_RECLAIM_INTERVAL": "20m"}, "", "longer than the default lease"),
        ({"AFK_GAUGES_INTERVAL": "soon"}, "", "AFK_GAUGES_INTERVAL"),
        ({"AFK_PRUNE_BATCH": "0"}, "", "prune_batch"),
        ({"AFK_METRICS_ADDR": "nowhere"}, "", "host:port"),
        ({"AFK_LOG_FORMAT": "xml"}, "", "log_format"),
        ({"AFK_BACKOFF_CAP_SECONDS": "1"}, "", "backoff_cap_seconds"),
        ({}, "reclaim_intervall = 5\n", "unknown setting"),
        ({}, "reclaim_interval = [1]\n", "reclaim_interval"),
        ({}, "not toml at all =\n", "not valid TOML"),
        ({"AFK_POISON_ALERT": "yes"}, "", "no digest destination"),
        ({"AFK_POISON_ALERT": "maybe"}, "", "AFK_POISON_ALERT"),
        # a loop's approval settings, held by the settings' own check
        ({"AFK_APPROVAL_TTL_SECONDS": "30s"}, "", "approval_ttl_seconds must be from 1 minute"),
        ({"AFK_APPROVAL_TTL_SECONDS": "40d"}, "", "approval_ttl_seconds must be from 1 minute"),
        ({"AFK_ON_APPROVAL_TIMEOUT": "allow"}, "", "on_approval_timeout must be deny or hold"),
        ({"AFK_ALERT_INTERVAL": "5m"}, "", "alert_interval must be at most 60 seconds"),
    ],
)
def test_bad_settings_are_refused_with_a_clear_message(tmp_path, env, toml, message):
    path = None
    if toml:
        path = tmp_path / "afk.toml"
        path.write_text(toml)
    with pytest.raises(BadInput, match=message):
        load_all(str(path) if path else None, env=env).check_service()


def test_defaults_are_consistent():
    ServiceSettings().check_against(QueueSettings())


def test_every_destination_has_its_switch_and_its_class():
    """One list of destinations (config.DESTINATIONS): the settings, the
    classes, the CLI's and the service's "no destination" message read it."""
    from dataclasses import fields

    from watchdog.config import DESTINATIONS, DigestSettings, no_destination
    from watchdog.destinations import SENDERS

    assert [name for name, _ in DESTINATIONS] == list(SENDERS)
    assert {switch for _, switch in DESTINATIONS} <= {f.name for f in fields(DigestSettings)}
    assert no_destination() == (
        "no digest destination is configured "
        "(AFK_DIGEST_SLACK_URL, AFK_DIGEST_WEBHOOK_URL, AFK_DIGEST_SMTP_URL or AFK_DIGEST_NTFY_URL)"
    )
    on = DigestSettings(webhook_url="https://h/x", webhook_secret="s" * 16)
    assert on.destinations() == ["webhook"]


@pytest.mark.parametrize(
    "name, value, read",
    [
        ("AFK_PORTS_PER_TASK", "7", lambda s: s.loop.ports_per_task),
        ("AFK_HOOK_TOKEN", "t" * 20, lambda s: s.service.hook_token),
        ("AFK_HOOK_SOCKET", "/run/broker.sock", lambda s: s.service.hook_socket),
    ],
)
def test_what_a_run_gives_its_agent_is_never_the_agents_afks_setting(name, value, read):
    """Issue 42 item 2: AFK_PORTS_PER_TASK (and the hooks' socket and token)
    is given to an agent's run and is also a setting. Inside a run (its
    broker in the environment) the agent's afk reads none of what the run
    gave it as a setting; a person's afk still does."""
    from watchdog.agents import credential

    default = read(load_all(env={}))
    assert read(load_all(env={name: value})) != default  # a person's: a setting
    inside = {name: value, credential.BROKER: "/run/afk-broker/b.sock"}
    assert read(load_all(env=inside)) == default


def test_each_variable_both_given_and_a_setting_is_named_and_dropped_inside_a_run():
    from watchdog import config
    from watchdog.agents import credential

    both = set(credential.GIVEN) & set(config.setting_names())
    assert both and sorted(both) == list(config.GIVEN_NOT_SETTINGS)
    assert {"AFK_PORTS_PER_TASK", "AFK_HOOK_TOKEN", "AFK_HOOK_SOCKET"} <= both
