/** Your configuration with backups and restore (§4.2): every save backs up the previous one. */
import { useState } from 'react';
import { LIMITS } from '../../../src/config/limits.ts';
import { api, call } from '../api/client.ts';
import { Button, Empty, ErrorText, Field, formatDate, Notice, parseJsonObject, Section, Spinner, useAction, useData } from '../ui.tsx';

export function ConfigPage() {
  const cfg = useData(() => call(api.GET('/api/config')));
  const [text, setText] = useState<string | null>(null);
  const [parseError, setParseError] = useState<string>();
  const [done, setDone] = useState<string>();
  const save = useAction();
  const restore = useAction();
  if (cfg.loading && !cfg.data) return <Spinner />;
  if (!cfg.data) return <ErrorText error={cfg.error} />;
  const value = text ?? JSON.stringify(cfg.data.config, null, 2);

  const onSave = async () => {
    setDone(undefined);
    const result = parseJsonObject(value);
    if ('error' in result) {
      setParseError(result.error);
      return;
    }
    const parsed = result.value;
    setParseError(undefined);
    if (
      await save.run(async () => {
        await call(api.POST('/api/config', { body: { config: parsed } }));
        setText(null);
        await cfg.reload();
      })
    )
      setDone('Saved. The previous configuration is in the backups below.');
  };

  return (
    <>
      <Section title="Configuration">
        <Field label="Configuration (JSON)" error={parseError}>
          {({ id, describedBy, invalid }) => (
            <textarea
              id={id}
              className="code"
              rows={16}
              value={value}
              onChange={(e) => setText(e.target.value)}
              aria-describedby={describedBy}
              aria-invalid={invalid}
              spellCheck={false}
            />
          )}
        </Field>
        <ErrorText error={save.error} />
        {done && <Notice kind="success">{done}</Notice>}
        <Button kind="primary" busy={save.busy} onClick={onSave}>
          Save configuration
        </Button>
      </Section>
      <Section title="Backups">
        <p className="muted">The last {LIMITS.configBackupsKept} configurations are kept. Restoring backs up the current one first.</p>
        {cfg.data.backups.length === 0 ? (
          <Empty>No backups yet. One is made each time you save.</Empty>
        ) : (
          <ul className="list">
            {cfg.data.backups.map((b) => (
              <li key={b.id} className="list-item">
                <span>{formatDate(b.timestamp)}</span>
                <Button
                  busy={restore.busy}
                  label={`Restore the backup of ${formatDate(b.timestamp)}`}
                  onClick={async () => {
                    setDone(undefined);
                    if (
                      await restore.run(async () => {
                        await call(api.PUT('/api/config', { body: { backupId: b.id } }));
                        setText(null);
                        await cfg.reload();
                      })
                    )
                      setDone(`Restored the configuration of ${formatDate(b.timestamp)}.`);
                  }}
                >
                  Restore
                </Button>
              </li>
            ))}
          </ul>
        )}
        <ErrorText error={restore.error} />
      </Section>
    </>
  );
}
