/**
 * The Manage tab: rename, start / stop / restart, delete (§4.7). Stop ends the agent's processes;
 * Start and Restart deploy it again from its saved configuration (docs/agents.md "Stop, suspend and restart").
 */
import { type FormEvent, useState } from 'react';
import { LIMITS } from '../../../../src/config/limits.ts';
import { api, call } from '../../api/client.ts';
import { navigate } from '../../router.ts';
import { useSession } from '../../session.tsx';
import { Button, ErrorText, Field, Notice, Section, useAction } from '../../ui.tsx';
import { validateAgentName } from '../agents.tsx';
import type { Agent } from './types.ts';

/** What a lifecycle action did, in the words of docs/agents.md "Stop, suspend and restart". */
function outcome(action: 'start' | 'stop' | 'restart', status: string | undefined): string {
  if (action === 'stop') return 'Stopped: its processes have ended and it holds no memory. Start deploys it again.';
  if (status === 'running') return 'It is already running.';
  return action === 'restart'
    ? 'Restarting with the saved configuration: it reads provisioning until it answers again.'
    : 'Starting with the saved configuration: it reads provisioning until it answers.';
}

export function Manage({ agent, onChanged }: { agent: Agent; onChanged: () => Promise<void> }) {
  const { user } = useSession();
  const [name, setName] = useState(agent.name);
  const [nameError, setNameError] = useState<string>();
  const [done, setDone] = useState<string>();
  const rename = useAction();
  const lifecycle = useAction();
  const remove = useAction();
  const [confirming, setConfirming] = useState(false);

  const doRename = async (e: FormEvent) => {
    e.preventDefault();
    setDone(undefined);
    const err = validateAgentName(name);
    setNameError(err);
    if (err) return;
    if (await rename.run(() => call(api.PATCH('/api/agents/{id}', { params: { path: { id: agent.id } }, body: { name: name.trim() } })))) {
      setDone('Renamed.');
      await onChanged();
    }
  };
  const act = async (action: 'start' | 'stop' | 'restart') => {
    setDone(undefined);
    const path = `/api/instance/{userId}/${action}` as '/api/instance/{userId}/start';
    let status: string | undefined;
    const ok = await lifecycle.run(async () => {
      const r = await call(api.POST(path, { params: { path: { userId: user!.id } }, body: { agentId: agent.id } }));
      status = r.agents[0]?.status;
    });
    if (ok) {
      setDone(outcome(action, status));
      await onChanged();
    }
  };
  return (
    <>
      <Section title="Rename">
        <form className="inline-form" onSubmit={doRename} noValidate>
          <Field label="Name" error={nameError} hint={`1 to ${LIMITS.agentNameMax} characters`}>
            {({ id, describedBy, invalid }) => (
              <input id={id} value={name} onChange={(e) => setName(e.target.value)} aria-describedby={describedBy} aria-invalid={invalid} />
            )}
          </Field>
          <Button type="submit" kind="primary" busy={rename.busy}>
            Rename
          </Button>
        </form>
        <ErrorText error={rename.error} />
      </Section>
      <Section title="Run">
        <div className="row">
          <Button onClick={() => act('start')} busy={lifecycle.busy}>
            Start
          </Button>
          <Button onClick={() => act('stop')} busy={lifecycle.busy}>
            Stop
          </Button>
          <Button onClick={() => act('restart')} busy={lifecycle.busy}>
            Restart
          </Button>
        </div>
        <ErrorText error={lifecycle.error} />
      </Section>
      {done && <Notice kind="success">{done}</Notice>}
      <Section title="Delete">
        <p>Deleting stops the agent and removes it with its configuration and messages. This cannot be undone.</p>
        {confirming ? (
          <div className="row">
            <Button
              kind="danger"
              busy={remove.busy}
              onClick={async () => {
                if (await remove.run(() => call(api.DELETE('/api/agents/{id}', { params: { path: { id: agent.id } } }))))
                  navigate('/dashboard');
              }}
            >
              Yes, delete {agent.name}
            </Button>
            <Button onClick={() => setConfirming(false)}>Cancel</Button>
          </div>
        ) : (
          <Button kind="danger" onClick={() => setConfirming(true)}>
            Delete agent
          </Button>
        )}
        <ErrorText error={remove.error} />
      </Section>
    </>
  );
}
