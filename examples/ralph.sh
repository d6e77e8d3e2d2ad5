#!/usr/bin/env bash
# A "Ralph loop" on afk-watchdog: claim -> run the agent with the task and its
# resume brief -> done or fail -> next, until the backlog is empty.
#
#   AFK_AGENT_ID=backlog-1 AGENT_CMD='claude -p' examples/ralph.sh
#
# The minimal loop, in bash, to read and adapt. For a night of work run
# `afk loop --agent backlog-1 -- claude -p` instead: it tells a usage limit,
# a provider outage and a logged-out agent from a failure of the task (this
# loop fails the task on any non-zero exit).
#
# This loop is the supervisor: it claimed the task, so it alone finishes it.
# The agent gets AFK_TASK_ID and AFK_TASK_TOKEN, so that inside it
# `afk checkpoint --patch '{"step": "tests pass"}'` and `afk once --name N -- CMD`
# need no plumbing; afk's hooks (`afk hooks claude --install`) never pause or
# finish a supervisor's task.
#
# - The lease is kept alive while the agent runs (a heartbeat every third of
#   it), so a two-hour run keeps its task, and a crashed loop's task is
#   reclaimed by the watchdog within a lease and a reclaim interval.
# - Ctrl-C or SIGTERM: the agent is stopped, its task paused (no attempt
#   spent), and the loop exits 130 or 143 without taking the next task.
# - An agent that exits 130 or 143 (interrupted) is paused, not failed.
set -uo pipefail
: "${AFK_AGENT_ID:?set AFK_AGENT_ID to the backlog to drain}"
export AFK_AGENT_ID
AGENT_CMD=${AGENT_CMD:-claude -p}
AFK=${AFK:-afk}
# One runner id per loop: two loops on one host must not share one. It is not
# exported, so the agent cannot claim under the loop's name.
RUNNER=${AFK_RUNNER_ID:-"$(hostname)-ralph-$$"}
unset AFK_RUNNER_ID AFK_TASK_ID AFK_TASK_TOKEN
LEASE=${AFK_LEASE_SECONDS:-120}
BEAT=$(python3 -c 'import sys; print(max(float(sys.argv[1]) / 3, 0.2))' "$LEASE")
# how often to look again while tasks wait out a retry's backoff
POLL=${RALPH_POLL_SECONDS:-5}

field() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

interrupted=
agent_pid=
on_signal() {
    interrupted=$1
    [ -n "$agent_pid" ] && kill -TERM "$agent_pid" 2>/dev/null
}
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

# Heartbeats the task while the agent runs; ends with the loop, even a SIGKILLed one.
# Its sleep is a child it kills on the way out: a leftover sleep would hold the
# loop's stdout open (a pipeline after the loop would hang for a beat).
keepalive() {
    local id=$1 token=$2 loop=$$ nap=
    trap '[ -n "$nap" ] && kill "$nap" 2>/dev/null; exit 0' TERM
    while :; do
        sleep "$BEAT" </dev/null >/dev/null 2>&1 &
        nap=$!
        wait "$nap" || exit 0
        kill -0 "$loop" 2>/dev/null || exit 0
        $AFK heartbeat "$id" --token "$token" >/dev/null 2>&1
        [ $? -eq 4 ] && exit 0  # the lease is lost: the agent's hooks stop it
    done
}

# A claim, with what a loop must not give up on: tasks that wait out a retry's
# backoff (exit 3 with a next_at: look again every $POLL s) and a database or
# pooler that blinks (exit 1: try again, five times, a little later each time).
# Sets task and status.
claim() {
    local tries=0
    while [ -z "$interrupted" ]; do
        task=$($AFK claim --runner "$RUNNER" --lease "$LEASE")
        status=$?
        if [ "$status" -eq 3 ] && [ "$(field next_at <<<"$task")" != "None" ]; then
            echo "ralph: tasks of $AFK_AGENT_ID wait for a retry; looking again in ${POLL}s" >&2
            sleep "$POLL" & wait $!
        elif [ "$status" -eq 1 ] && [ "$tries" -lt 5 ]; then
            tries=$((tries + 1))
            sleep "$tries" & wait $!
        else
            return
        fi
    done
}

# Finishing a task claims the next one in the same statement (`done --next`,
# `fail --next`): one afk call per task between agent runs, not two.
claim
while [ -z "$interrupted" ]; do
    # our finish was refused (the agent settled the task itself, with `afk fail`
    # or `afk pause`, or its lease was lost), nothing was claimed next, or the
    # database blinked: claim again
    if [ "$status" -eq 4 ] || [ "$status" -eq 3 ] || [ "$status" -eq 1 ]; then
        claim
    fi
    [ -n "$interrupted" ] && break
    if [ "$status" -eq 3 ]; then
        echo "ralph: the backlog of $AFK_AGENT_ID is empty" >&2
        exit 0
    elif [ "$status" -ne 0 ]; then
        echo "ralph: claim failed (exit $status)" >&2
        exit "$status"
    fi
    id=$(field id <<<"$task")
    token=$(field token <<<"$task")
    # the heartbeat starts first: the brief is a CLI call too, and on a loaded
    # machine with a short lease its time would come out of the lease
    keepalive "$id" "$token" &
    beat=$!
    prompt="$(field title <<<"$task")

$($AFK resume-brief "$id")"

    AFK_TASK_ID=$id AFK_TASK_TOKEN=$token $AGENT_CMD "$prompt" &
    agent_pid=$!
    wait "$agent_pid"
    status=$?
    # A trap ends that wait early, while the agent is still stopping: wait
    # until it is gone. Not with a second `wait "$agent_pid"`: if bash reaped
    # the agent while the trap ran, that waits for the heartbeat instead, for
    # good (seen with bash 5.2 on a loaded machine).
    while [ -n "$interrupted" ] && kill -0 "$agent_pid" 2>/dev/null; do
        sleep 0.1
    done
    agent_pid=
    kill "$beat" 2>/dev/null
    wait "$beat" 2>/dev/null

    if [ -n "$interrupted" ] || [ "$status" -eq 130 ] || [ "$status" -eq 143 ]; then
        $AFK pause "$id" --token "$token" >/dev/null \
            || echo "ralph: pause refused for $id" >&2
        echo "ralph: interrupted: task $id paused" >&2
        exit "${interrupted:-$status}"
    elif [ "$status" -eq 0 ]; then
        task=$($AFK done "$id" --token "$token" --next)
        status=$?
    else
        task=$($AFK fail "$id" --token "$token" --error "agent exited $status" --next)
        status=$?
    fi
    [ "$status" -eq 4 ] && echo "ralph: task $id was not finished by the loop: the agent" \
        "settled it itself, or its lease was lost" >&2
done
# interrupted while finishing: the task claimed next goes back, no attempt spent
if [ "$status" -eq 0 ] && [ -n "$task" ]; then
    $AFK pause "$(field id <<<"$task")" --token "$(field token <<<"$task")" >/dev/null
fi
exit "$interrupted"
