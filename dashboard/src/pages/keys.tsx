/** API keys (§4.3): list, create (the key is shown once, with a copy button), delete. */
import { type FormEvent, useState } from 'react';
import { LIMITS } from '../../../src/config/limits.ts';
import { api, call } from '../api/client.ts';
import { Button, CopyButton, Empty, ErrorText, Field, formatDate, Notice, Section, Spinner, useAction, useData } from '../ui.tsx';

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
          <div className="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Key</th>
                  <th scope="col">Created</th>
                  <th scope="col">Last used</th>
                  <th scope="col">
                    <span className="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {keys.data.map((k) => (
                  <tr key={k.id}>
                    <td>{k.name}</td>
                    <td>
                      <code>{k.keyPreview}…</code>
                    </td>
                    <td>{formatDate(k.createdAt)}</td>
                    <td>{k.lastUsed ? formatDate(k.lastUsed) : 'never'}</td>
                    <td>
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
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        <ErrorText error={remove.error} />
        {keys.data && keys.data.length > 0 && <Notice>Deleting a key stops it working within seconds on every server.</Notice>}
      </Section>
    </>
  );
}
