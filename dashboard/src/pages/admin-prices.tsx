/**
 * The admin page's model prices (GET/PUT/DELETE /api/admin/model-prices; docs/admin.md "Model
 * prices"): every model with the price in force and where it comes from, a form to price a model
 * (a price set here wins over MODEL_PRICES and the catalogue's, at once), and the newest changes
 * with the admin who made them.
 */
import { type FormEvent, useState } from 'react';
import { api, call } from '../api/client.ts';
import { Badge, Button, DataTable, ErrorText, Field, formatDate, Notice, Section, Spinner, TextField, useAction, useData } from '../ui.tsx';

const SOURCE_LABEL = { catalogue: 'catalogue', setting: 'MODEL_PRICES', admin: 'this page', none: 'unpriced' } as const;
type Source = keyof typeof SOURCE_LABEL;
type Row = { modelId: string; name: string | null; input: number | null; output: number | null; source: Source };

/** A price field: a number of USD per million tokens, 0 to 100 000 (the API's rule). */
const priceError = (v: string) =>
  /^\d{1,6}(\.\d{1,10})?$/.test(v.trim()) && Number(v) <= 100_000 ? undefined : 'Enter USD per million tokens, 0 to 100000, e.g. 0.15.';
const perM = (n: number | null) => (n === null ? '—' : `$${n}`);

export function ModelPrices() {
  const prices = useData(() => call(api.GET('/api/admin/model-prices')), []);
  const change = useAction();
  const [filter, setFilter] = useState<'unpriced' | 'operator' | 'all'>('unpriced');
  const [form, setForm] = useState({ modelId: '', input: '', output: '' });
  const [errors, setErrors] = useState<{ modelId?: string; input?: string; output?: string }>({});
  const [done, setDone] = useState<string | null>(null);
  const p = prices.data;
  const rows = (p?.models ?? []).filter((m) =>
    filter === 'all' ? true : filter === 'unpriced' ? m.source === 'none' : m.source === 'admin' || m.source === 'setting',
  );

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const found = {
      modelId: form.modelId.trim() && form.modelId.trim().length <= 200 ? undefined : 'Enter a model id, e.g. custom/house-model.',
      input: priceError(form.input),
      output: priceError(form.output),
    };
    setErrors(found);
    if (found.modelId || found.input || found.output) return;
    await change.run(async () => {
      const body = { modelId: form.modelId.trim(), input: Number(form.input), output: Number(form.output) };
      await call(api.PUT('/api/admin/model-prices', { body }));
      await prices.reload();
      setDone(`${body.modelId} now costs $${body.input} per million input tokens and $${body.output} per million output tokens.`);
      setForm({ modelId: '', input: '', output: '' });
    });
  };
  const remove = (modelId: string) =>
    change.run(async () => {
      await call(api.DELETE('/api/admin/model-prices', { params: { query: { modelId } } }));
      await prices.reload();
      setDone(`The price set here for ${modelId} is removed.`);
    });
  const edit = (m: Row) => {
    setForm({ modelId: m.modelId, input: m.input === null ? '' : String(m.input), output: m.output === null ? '' : String(m.output) });
    setErrors({});
    setDone(null);
  };

  return (
    <Section title="Model prices">
      <p className="muted">
        USD per million tokens. A price set here wins over <code>MODEL_PRICES</code> and the catalogue's, and applies to the next call.{' '}
        {p?.billing === 'balance'
          ? 'Billing is on (AI_BILLING=balance): a model without a price is refused.'
          : 'Billing is off: calls of a model without a price are metered at $0 and shown as "unpriced" on the Usage page.'}
      </p>
      {prices.loading && !p ? <Spinner /> : null}
      <ErrorText error={(!p ? prices.error : null) ?? change.error} />
      {done && <Notice kind="success">{done}</Notice>}
      <form className="inline-form" onSubmit={submit} noValidate aria-label="Set a model price">
        <TextField
          label="Model"
          list="priced-models"
          value={form.modelId}
          onChange={(modelId) => setForm({ ...form, modelId })}
          error={errors.modelId}
        />
        <datalist id="priced-models">
          {p?.models.map((m) => (
            <option key={m.modelId} value={m.modelId} />
          ))}
        </datalist>
        <TextField
          label="Input (USD / M tokens)"
          inputMode="decimal"
          value={form.input}
          onChange={(input) => setForm({ ...form, input })}
          error={errors.input}
        />
        <TextField
          label="Output (USD / M tokens)"
          inputMode="decimal"
          value={form.output}
          onChange={(output) => setForm({ ...form, output })}
          error={errors.output}
        />
        <Button type="submit" kind="primary" busy={change.busy}>
          Set price
        </Button>
      </form>
      {p && (
        <>
          <Field label="Show">
            {({ id }) => (
              <select id={id} value={filter} onChange={(e) => setFilter(e.target.value as typeof filter)}>
                <option value="unpriced">Models without a price</option>
                <option value="operator">Priced here or in MODEL_PRICES</option>
                <option value="all">All models</option>
              </select>
            )}
          </Field>
          {rows.length === 0 ? (
            <p className="muted">{filter === 'unpriced' ? 'Every model has a price.' : 'None.'}</p>
          ) : (
            <DataTable
              caption="Model prices"
              rowKey={(m) => m.modelId}
              rows={rows}
              columns={[
                { header: 'Model', cell: (m) => (m.name && m.name !== m.modelId ? `${m.modelId} (${m.name})` : m.modelId) },
                { header: 'Input', numeric: true, cell: (m) => perM(m.input) },
                { header: 'Output', numeric: true, cell: (m) => perM(m.output) },
                { header: 'Source', cell: (m) => <Badge value={SOURCE_LABEL[m.source]} /> },
                {
                  header: 'Actions',
                  hideHeader: true,
                  cell: (m) => (
                    <>
                      <Button label={`Edit the price of ${m.modelId}`} onClick={() => edit(m)}>
                        Edit
                      </Button>
                      {m.source === 'admin' && (
                        <>
                          {' '}
                          <Button
                            label={`Remove the price set here for ${m.modelId}`}
                            disabled={change.busy}
                            onClick={() => remove(m.modelId)}
                          >
                            Remove
                          </Button>
                        </>
                      )}
                    </>
                  ),
                },
              ]}
            />
          )}
          {p.changes.length > 0 && (
            <DataTable
              caption="Recent price changes"
              rowKey={(c) => `${c.at}-${c.modelId}`}
              rows={p.changes}
              columns={[
                { header: 'When', cell: (c) => formatDate(c.at) },
                { header: 'Model', cell: (c) => c.modelId },
                { header: 'Price', cell: (c) => (c.input === null ? 'removed' : `${perM(c.input)} / ${perM(c.output)}`) },
                { header: 'By', cell: (c) => c.by ?? 'a deleted account' },
              ]}
            />
          )}
        </>
      )}
    </Section>
  );
}
