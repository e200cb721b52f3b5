/** API keys (§4.3): list, create (the key is shown once, with a copy button), delete. */
import { type FormEvent, useState } from 'react';
import { LIMITS } from '../../../src/config/limits.ts';
import { api, call } from '../api/client.ts';
import {
  Button,
  CopyButton,
  DataTable,
  Empty,
  ErrorText,
  Field,
  formatDate,
  Notice,
  Section,
  Spinner,
  useAction,
  useData,
} from '../ui.tsx';

export function KeysPage() {
  const keys = useData(async () => (await call(api.GET('/api/keys'))).keys);
  const [name, setName] = useState('');
  const [nameError, setNameError] = useState<string>();
  // the raw key lives only in this component's state until the page changes: never stored
  const [created, setCreated] = useState<{ name: string; key: string } | null>(null);
  const create = useAction();
  const remove = useAction();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const n = name.trim();
    const err = !n
      ? 'Give the key a name.'
      : n.length > LIMITS.apiKeyNameMax
        ? `Use at most ${LIMITS.apiKeyNameMax} characters.`
        : undefined;
    setNameError(err);
    if (err) return;
    await create.run(async () => {
      const res = await call(api.POST('/api/keys', { body: { name: n } }));
      setCreated({ name: res.name, key: res.key });
      setName('');
      await keys.reload();
    });
  };

  return (
    <>
      <Section title="Create an API key">
        <p className="muted">Keys let programs call the platform as you (Authorization: Bearer sk_…).</p>
        <form className="inline-form" onSubmit={submit} noValidate>
          <Field label="Key name" error={nameError}>
            {({ id, describedBy, invalid }) => (
              <input
                id={id}
                value={name}
                onChange={(e) => setName(e.target.value)}
                aria-describedby={describedBy}
                aria-invalid={invalid}
                placeholder="ci-deploy"
              />
            )}
          </Field>
          <Button type="submit" kind="primary" busy={create.busy}>
            Create key
          </Button>
        </form>
        <ErrorText error={create.error} />
        {created && (
          <div className="secret" role="status">
            <p>
              <strong>Copy your new key “{created.name}” now.</strong> It is shown only this once.
            </p>
            <code className="secret-value" data-testid="new-key">
              {created.key}
            </code>
            <div className="row">
              <CopyButton text={created.key} />
              <Button onClick={() => setCreated(null)}>I have copied it</Button>
            </div>
          </div>
        )}
      </Section>
      <Section title="Your keys">
        {keys.loading && !keys.data ? (
          <Spinner />
        ) : !keys.data ? (
          <ErrorText error={keys.error} />
        ) : keys.data.length === 0 ? (
          <Empty>No API keys yet.</Empty>
        ) : (
          <DataTable
            caption="Your API keys"
            rows={keys.data}
            rowKey={(k) => k.id}
            columns={[
              { header: 'Name', cell: (k) => k.name },
              { header: 'Key', cell: (k) => <code>{k.keyPreview}…</code> },
              { header: 'Created', cell: (k) => formatDate(k.createdAt) },
              { header: 'Last used', cell: (k) => (k.lastUsed ? formatDate(k.lastUsed) : 'never') },
              {
                header: 'Actions',
                hideHeader: true,
                cell: (k) => (
                  <Button
                    kind="danger"
                    label={`Delete key ${k.name}`}
                    busy={remove.busy}
                    onClick={async () => {
                      if (await remove.run(() => call(api.DELETE('/api/keys/{id}', { params: { path: { id: k.id } } }))))
                        await keys.reload();
                    }}
                  >
                    Delete
                  </Button>
                ),
              },
            ]}
          />
        )}
        <ErrorText error={remove.error} />
        {keys.data && keys.data.length > 0 && <Notice>Deleting a key stops it working within seconds on every server.</Notice>}
      </Section>
    </>
  );
}
