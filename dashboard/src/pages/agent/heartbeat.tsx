/** The Heartbeat tab: how often the platform wakes the agent (§4.12). */
import { type FormEvent, useState } from 'react';
import { LIMITS } from '../../../../src/config/limits.ts';
import { api, call } from '../../api/client.ts';
import { Button, ErrorText, Field, formatDate, Notice, Section, Spinner, useAction, useData } from '../../ui.tsx';

export function validateFrequency(f: string): string | undefined {
  const m = /^(\d{1,6})([mhd])$/.exec(f.trim());
  if (!m) return 'Use a number and a unit: m (minutes), h (hours) or d (days), e.g. 30m or 3h.';
  const ms = Number(m[1]) * { m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 'm' | 'h' | 'd'];
  if (ms <= 0) return 'The frequency must be more than zero.';
  if (ms > LIMITS.heartbeatMaxFrequencyMs) return 'At most 30 days.';
  return undefined;
}

export function Heartbeat({ agentId }: { agentId: string }) {
  const hb = useData(async () => (await call(api.GET('/api/heartbeat', { params: { query: { agentId } } }))).heartbeat, [agentId]);
  const [frequency, setFrequency] = useState<string | null>(null);
  const [enabled, setEnabled] = useState<boolean | null>(null);
  const [freqError, setFreqError] = useState<string>();
  const [saved, setSaved] = useState(false);
  const action = useAction();
  if (hb.loading && !hb.data) return <Spinner />;
  if (!hb.data) return <ErrorText error={hb.error} />;
  const f = frequency ?? hb.data.frequency;
  const on = enabled ?? hb.data.enabled;
  const save = async (e: FormEvent) => {
    e.preventDefault();
    setSaved(false);
    const err = validateFrequency(f);
    setFreqError(err);
    if (err) return;
    const ok = await action.run(async () => {
      await call(api.POST('/api/heartbeat', { body: { agentId, frequency: f.trim(), enabled: on } }));
      await hb.reload();
    });
    setSaved(ok);
  };
  return (
    <Section title="Heartbeat">
      <p className="muted">
        The platform wakes the agent on this schedule. Last: {formatDate(hb.data.lastHeartbeat)} · next: {formatDate(hb.data.nextHeartbeat)}
      </p>
      <form className="inline-form" onSubmit={save} noValidate>
        <Field label="Every" error={freqError} hint="e.g. 30m, 3h, 1d">
          {({ id, describedBy, invalid }) => (
            <input id={id} value={f} onChange={(e) => setFrequency(e.target.value)} aria-describedby={describedBy} aria-invalid={invalid} />
          )}
        </Field>
        <label className="check">
          <input type="checkbox" checked={on} onChange={(e) => setEnabled(e.target.checked)} /> Enabled
        </label>
        <Button type="submit" kind="primary" busy={action.busy}>
          Save heartbeat
        </Button>
      </form>
      <ErrorText error={action.error} />
      {saved && <Notice kind="success">Heartbeat saved.</Notice>}
    </Section>
  );
}
