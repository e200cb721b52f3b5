/**
 * The Configuration tab: the agent's persona and schedule as a form (system prompt, model,
 * heartbeat prompt, heartbeat schedule with its last and next run), and the stored configuration
 * as JSON under "Advanced (JSON)" (§4.7 config, §4.12 heartbeat, docs/agents.md "Persona").
 */
import { type FormEvent, useState } from 'react';
import { LIMITS } from '../../../../src/config/limits.ts';
import { api, call } from '../../api/client.ts';
import { useSession } from '../../session.tsx';
import { Button, ErrorText, Field, formatDate, Notice, parseJsonObject, Section, Spinner, useAction, useData } from '../../ui.tsx';

type Json = Record<string, unknown>;

const APPLIES =
  'The agent reads its configuration when it is deployed: a change applies when you restart it (Restart deploys it again with what is saved). The model and the heartbeat schedule (Every, Enabled) apply at once: the next message runs the model saved.';

/** What a save changed: something the agent reads at its next deploy (`restart`), or only the model or schedule, applied at once (`live`). */
type SaveOutcome = 'restart' | 'live';

function validateFrequency(f: string): string | undefined {
  const m = /^(\d{1,6})([mhd])$/.exec(f.trim());
  if (!m) return 'Use a number and a unit: m (minutes), h (hours) or d (days), e.g. 30m or 3h.';
  const ms = Number(m[1]) * { m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 'm' | 'h' | 'd'];
  if (ms <= 0) return 'The frequency must be more than zero.';
  if (ms > LIMITS.heartbeatMaxFrequencyMs) return 'At most 30 days.';
  return undefined;
}

const read = (config: Json, path: string): unknown =>
  path.split('.').reduce<unknown>((cur, k) => (cur && typeof cur === 'object' ? (cur as Json)[k] : undefined), config);

/** A copy of `config` with `path` set, or removed when `value` is empty. */
function write(config: Json, path: string, value: string): Json {
  const [head, ...rest] = path.split('.') as [string, ...string[]];
  const out = { ...config };
  if (rest.length === 0) {
    if (value) out[head] = value;
    else delete out[head];
    return out;
  }
  const child = out[head] && typeof out[head] === 'object' && !Array.isArray(out[head]) ? (out[head] as Json) : {};
  out[head] = write(child, rest.join('.'), value);
  return out;
}

const text = (v: unknown) => (typeof v === 'string' ? v : '');

/** `onSaved`: the page reloads the agent, whose header names the model a save may have changed. */
export function AgentConfig({ agentId, onSaved }: { agentId: string; onSaved?: () => Promise<void> }) {
  const cfg = useData(
    async () => (await call(api.GET('/api/agents/{id}/config', { params: { path: { id: agentId } } }))).config as Json,
    [agentId],
  );
  const hb = useData(async () => (await call(api.GET('/api/heartbeat', { params: { query: { agentId } } }))).heartbeat, [agentId]);
  const models = useData(
    async () => (await call(api.GET('/api/agents/{id}/models', { params: { path: { id: agentId } } }))).models,
    [agentId],
  );
  const [saved, setSaved] = useState<SaveOutcome>();
  if ((cfg.loading && !cfg.data) || (hb.loading && !hb.data)) return <Spinner />;
  if (!cfg.data || !hb.data) return <ErrorText error={cfg.error ?? hb.error} />;
  // the forms are keyed on what they show, so a reload after a save starts them afresh
  const reload = async (outcome: SaveOutcome) => {
    setSaved(outcome);
    await Promise.all([cfg.reload(), hb.reload(), onSaved?.()]);
  };
  return (
    <>
      {saved === 'restart' && <RestartToApply agentId={agentId} />}
      {saved === 'live' && <Notice kind="success">Saved and applied.</Notice>}
      <PersonaForm
        key={JSON.stringify([cfg.data, hb.data])}
        agentId={agentId}
        config={cfg.data}
        heartbeat={hb.data}
        models={models.data ?? []}
        modelsError={models.error}
        onSaved={reload}
        onEdit={() => setSaved(undefined)}
      />
      <details className="advanced-json">
        <summary>Advanced (JSON)</summary>
        <JsonEditor
          key={JSON.stringify(cfg.data)}
          agentId={agentId}
          config={cfg.data}
          onSaved={reload}
          onEdit={() => setSaved(undefined)}
        />
      </details>
    </>
  );
}

/** After a save the running agent does not read yet: say so, and offer the Restart that applies it. */
function RestartToApply({ agentId }: { agentId: string }) {
  const { user } = useSession();
  const restart = useAction();
  const [restarted, setRestarted] = useState(false);
  if (restarted)
    return <Notice kind="success">Restarting with the saved configuration: the agent reads provisioning until it answers again.</Notice>;
  return (
    <Notice kind="info">
      Saved. Restart the agent to apply it.{' '}
      <Button
        busy={restart.busy}
        onClick={async () => {
          const ok = await restart.run(() =>
            call(api.POST('/api/instance/{userId}/restart', { params: { path: { userId: user!.id } }, body: { agentId } })),
          );
          if (ok) setRestarted(true);
        }}
      >
        Restart
      </Button>
      <ErrorText error={restart.error} />
    </Notice>
  );
}

function PersonaForm(props: {
  agentId: string;
  config: Json;
  heartbeat: { frequency: string; enabled: boolean; lastHeartbeat: string | null; nextHeartbeat: string | null };
  models: { id: string; name: string }[];
  modelsError: unknown;
  onSaved: (outcome: SaveOutcome) => Promise<void>;
  onEdit: () => void;
}) {
  const { agentId, config, heartbeat } = props;
  const [systemPrompt, setSystemPrompt] = useState(text(config.systemPrompt));
  const [model, setModel] = useState(text(read(config, 'agents.defaults.model')));
  const [heartbeatPrompt, setHeartbeatPrompt] = useState(text(read(config, 'agents.defaults.heartbeat.prompt')));
  const [frequency, setFrequency] = useState(heartbeat.frequency);
  const [enabled, setEnabled] = useState(heartbeat.enabled);
  const [errors, setErrors] = useState<{ systemPrompt?: string; heartbeatPrompt?: string; frequency?: string }>({});
  const action = useAction();
  const options = props.models.some((m) => m.id === model) || !model ? props.models : [{ id: model, name: model }, ...props.models];

  const save = async (e: FormEvent) => {
    e.preventDefault();
    props.onEdit();
    const tooLong = (s: string, max: number) => (s.length > max ? `At most ${max.toLocaleString()} characters.` : undefined);
    const next = {
      systemPrompt: tooLong(systemPrompt, LIMITS.agentSystemPromptMax),
      heartbeatPrompt: tooLong(heartbeatPrompt, LIMITS.agentHeartbeatPromptMax),
      frequency: validateFrequency(frequency),
    };
    setErrors(next);
    if (next.systemPrompt || next.heartbeatPrompt || next.frequency) return;
    let body = write(config, 'systemPrompt', systemPrompt.trim() ? systemPrompt : '');
    body = write(body, 'agents.defaults.model', model);
    body = write(body, 'agents.defaults.heartbeat.prompt', heartbeatPrompt.trim() ? heartbeatPrompt : '');
    const scheduleChanged = frequency.trim() !== heartbeat.frequency || enabled !== heartbeat.enabled;
    // the model is read by the model gateway at every call (docs/agents.md "Model"): it needs no restart
    const modelChanged = model !== text(read(config, 'agents.defaults.model'));
    const configChanged =
      systemPrompt !== text(config.systemPrompt) || heartbeatPrompt !== text(read(config, 'agents.defaults.heartbeat.prompt'));
    const ok = await action.run(async () => {
      if (configChanged || modelChanged) await call(api.PUT('/api/agents/{id}/config', { params: { path: { id: agentId } }, body }));
      // saving the schedule restarts its clock (§4.12): only when it changed
      if (scheduleChanged) await call(api.POST('/api/heartbeat', { body: { agentId, frequency: frequency.trim(), enabled } }));
    });
    if (ok) await props.onSaved(configChanged ? 'restart' : 'live');
  };

  return (
    <Section title="Persona">
      <p className="muted">{APPLIES}</p>
      <form className="persona-form" onSubmit={save} noValidate>
        <Field
          label="System prompt"
          error={errors.systemPrompt}
          hint={`Sent to the model as the first system message of every chat. Empty: none. At most ${LIMITS.agentSystemPromptMax.toLocaleString()} characters.`}
        >
          {({ id, describedBy, invalid }) => (
            <textarea
              id={id}
              rows={8}
              value={systemPrompt}
              onChange={(e) => setSystemPrompt(e.target.value)}
              aria-describedby={describedBy}
              aria-invalid={invalid}
            />
          )}
        </Field>
        <Field
          label="Model"
          hint={
            props.modelsError
              ? 'The model catalog could not be loaded.'
              : 'The one model this agent runs for every message. Offered: the models your plan allows that a configured provider serves.'
          }
        >
          {({ id, describedBy }) => (
            <select id={id} value={model} onChange={(e) => setModel(e.target.value)} aria-describedby={describedBy}>
              {options.map((m) => (
                <option key={m.id} value={m.id}>
                  {m.name === m.id ? m.id : `${m.name} (${m.id})`}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field
          label="Heartbeat prompt"
          error={errors.heartbeatPrompt}
          hint="What the agent runs on each heartbeat (with HEARTBEAT.md from its workspace). Empty: the default prompt."
        >
          {({ id, describedBy, invalid }) => (
            <textarea
              id={id}
              rows={4}
              value={heartbeatPrompt}
              onChange={(e) => setHeartbeatPrompt(e.target.value)}
              aria-describedby={describedBy}
              aria-invalid={invalid}
            />
          )}
        </Field>
        <fieldset className="heartbeat-schedule">
          <legend>Heartbeat</legend>
          <p className="muted">
            Last run: {formatDate(heartbeat.lastHeartbeat)} · Next run: {formatDate(heartbeat.nextHeartbeat)}
          </p>
          <Field label="Every" error={errors.frequency} hint="e.g. 30m, 3h, 1d">
            {({ id, describedBy, invalid }) => (
              <input
                id={id}
                value={frequency}
                onChange={(e) => setFrequency(e.target.value)}
                aria-describedby={describedBy}
                aria-invalid={invalid}
              />
            )}
          </Field>
          <label className="check">
            <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.target.checked)} /> Enabled
          </label>
        </fieldset>
        <ErrorText error={action.error} />
        <Button type="submit" kind="primary" busy={action.busy}>
          Save configuration
        </Button>
      </form>
    </Section>
  );
}

/** The stored configuration as JSON (what the form edits, and every other §2 key). */
function JsonEditor(props: { agentId: string; config: Json; onSaved: (outcome: SaveOutcome) => Promise<void>; onEdit: () => void }) {
  const { agentId, config, onSaved } = props;
  const [value, setValue] = useState(JSON.stringify(config, null, 2));
  const [parseError, setParseError] = useState<string>();
  const action = useAction();
  const save = async () => {
    props.onEdit();
    const result = parseJsonObject(value);
    if ('error' in result) {
      setParseError(result.error);
      return;
    }
    setParseError(undefined);
    const ok = await action.run(async () => {
      await call(api.PUT('/api/agents/{id}/config', { params: { path: { id: agentId } }, body: result.value }));
    });
    if (ok) await onSaved('restart');
  };
  return (
    <div className="advanced-json-body">
      <p className="muted">Secrets such as bot tokens are shown masked; leave them as they are to keep them.</p>
      <Field label="Configuration (JSON)" error={parseError}>
        {({ id, describedBy, invalid }) => (
          <textarea
            id={id}
            className="code"
            rows={14}
            value={value}
            onChange={(e) => setValue(e.target.value)}
            aria-describedby={describedBy}
            aria-invalid={invalid}
            spellCheck={false}
          />
        )}
      </Field>
      <ErrorText error={action.error} />
      <Button kind="primary" busy={action.busy} onClick={save}>
        Save JSON
      </Button>
    </div>
  );
}
