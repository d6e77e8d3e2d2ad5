#!/usr/bin/env bash
# A "Ralph loop" on afk-watchdog: claim -> run the agent with the spec and the
# resume brief -> done or fail -> next. A crash of this loop or of the agent
# loses nothing: the lease runs out, the watchdog reclaims the task, and the
# next run of the loop gets it back with its checkpoint.
#
#   AFK_AGENT_ID=backlog-1 AGENT_CMD='claude -p' examples/ralph.sh
#
# The agent sees AFK_TASK_ID and AFK_TASK_TOKEN, so it can checkpoint
# (`afk checkpoint "$AFK_TASK_ID" --token "$AFK_TASK_TOKEN" --patch ...`) and run
# side effects once (`afk once "$AFK_TASK_ID" --token "$AFK_TASK_TOKEN" --name ... -- ...`).
set -uo pipefail
: "${AFK_AGENT_ID:?set AFK_AGENT_ID to the backlog to drain}"
AGENT_CMD=${AGENT_CMD:-claude -p}
AFK=${AFK:-afk}
export AFK_RUNNER_ID=${AFK_RUNNER_ID:-"$(hostname)-ralph"}

field() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

while true; do
    task=$($AFK claim)
    status=$?
    if [ "$status" -eq 3 ]; then
        echo "ralph: the backlog of $AFK_AGENT_ID is empty" >&2
        exit 0
    elif [ "$status" -ne 0 ]; then
        echo "ralph: claim failed (exit $status)" >&2
        exit "$status"
    fi
    id=$(field id <<<"$task")
    token=$(field token <<<"$task")
    prompt="$(field title <<<"$task")

$($AFK resume-brief "$id")"

    if AFK_TASK_ID=$id AFK_TASK_TOKEN=$token $AGENT_CMD "$prompt"; then
        $AFK done "$id" --token "$token" >/dev/null || echo "ralph: done refused for $id" >&2
    else
        status=$?
        $AFK fail "$id" --token "$token" --error "agent exited $status" >/dev/null \
            || echo "ralph: fail refused for $id" >&2
    fi
done
