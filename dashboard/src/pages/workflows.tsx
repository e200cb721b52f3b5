/** Workflows (§4.14): create, edit nodes (type and JSON config), enable/disable, delete. */
import { type FormEvent, useState } from 'react';
import { LIMITS } from '../../../src/config/limits.ts';
import { api, call, messageOf } from '../api/client.ts';
import type { paths } from '../api/openapi.gen.ts';
import { Badge, Button, Empty, ErrorText, Field, formatDate, Section, Spinner, useAction, useData } from '../ui.tsx';

type Workflow = paths['/api/workflows']['get']['responses'][200]['content']['application/json']['workflows'][number];
type NodeType = Workflow['nodes'][number]['type'];
const NODE_TYPES: NodeType[] = ['trigger', 'action', 'condition', 'output'];
type DraftNode = { key: number; type: NodeType; config: string };
let nextKey = 0;

export function WorkflowsPage() {
  const list = useData(async () => (await call(api.GET('/api/workflows'))).workflows);
  const [editing, setEditing] = useState<string | null>(null);
  return (
    <>
      <CreateWorkflow
        onCreated={async (id) => {
          await list.reload();
          setEditing(id);
        }}
      />
      <Section title="Your workflows">
        {list.loading && !list.data ? (
          <Spinner />
        ) : !list.data ? (
          <ErrorText error={list.error} />
        ) : list.data.length === 0 ? (
          <Empty>No workflows yet.</Empty>
        ) : (
          <ul className="list">
            {list.data.map((w) =>
              editing === w.id ? (
                <li key={w.id}>
                  <EditWorkflow
                    workflow={w}
                    onDone={async () => {
                      setEditing(null);
                      await list.reload();
                    }}
                  />
                </li>
              ) : (
                <WorkflowRow key={w.id} workflow={w} onEdit={() => setEditing(w.id)} onChanged={list.reload} />
              ),
            )}
          </ul>
        )}
      </Section>
    </>
  );
}

function WorkflowRow({ workflow: w, onEdit, onChanged }: { workflow: Workflow; onEdit: () => void; onChanged: () => Promise<void> }) {
  const action = useAction();
  return (
    <li className="list-item">
      <div>
        <strong>{w.name}</strong> <Badge value={w.enabled ? 'enabled' : 'disabled'} />
        <div className="muted">
          {w.nodes.length} node{w.nodes.length === 1 ? '' : 's'} · updated {formatDate(w.updatedAt)}
          {w.description ? ` · ${w.description}` : ''}
        </div>
      </div>
      <div className="row">
        <label className="check">
          <input
            type="checkbox"
            checked={w.enabled}
            disabled={action.busy}
            onChange={async (e) => {
              const enabled = e.target.checked;
              if (
                await action.run(() =>
                  call(api.PUT('/api/workflows/{workflowId}', { params: { path: { workflowId: w.id } }, body: { enabled } })),
                )
              )
                await onChanged();
            }}
          />{' '}
          Enabled
        </label>
        <Button onClick={onEdit}>Edit</Button>
        <Button
          kind="danger"
          label={`Delete workflow ${w.name}`}
          busy={action.busy}
          onClick={async () => {
            if (await action.run(() => call(api.DELETE('/api/workflows/{workflowId}', { params: { path: { workflowId: w.id } } }))))
              await onChanged();
          }}
        >
          Delete
        </Button>
      </div>
      <ErrorText error={action.error} />
    </li>
  );
}

function CreateWorkflow({ onCreated }: { onCreated: (id: string) => Promise<void> }) {
  const [name, setName] = useState('');
  const [nameError, setNameError] = useState<string>();
  const action = useAction();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const n = name.trim();
    const err = !n
      ? 'Give the workflow a name.'
      : n.length > LIMITS.workflowNameMax
        ? `Use at most ${LIMITS.workflowNameMax} characters.`
        : undefined;
    setNameError(err);
    if (err) return;
    await action.run(async () => {
      const res = await call(api.POST('/api/workflows', { body: { name: n, nodes: [{ type: 'trigger', config: {} }] } }));
      setName('');
      await onCreated(res.workflow.id);
    });
  };
  return (
    <Section title="New workflow">
      <form className="inline-form" onSubmit={submit} noValidate>
        <Field label="Name" error={nameError}>
          {({ id, describedBy, invalid }) => (
            <input id={id} value={name} onChange={(e) => setName(e.target.value)} aria-describedby={describedBy} aria-invalid={invalid} />
          )}
        </Field>
        <Button type="submit" kind="primary" busy={action.busy}>
          Create workflow
        </Button>
      </form>
      <ErrorText error={action.error} />
    </Section>
  );
}

const parseJson = (s: string) => {
  try {
    return { value: JSON.parse(s || '{}') as unknown };
  } catch (err) {
    return { error: messageOf(err) };
  }
};

function EditWorkflow({ workflow: w, onDone }: { workflow: Workflow; onDone: () => Promise<void> }) {
  const [name, setName] = useState(w.name);
  const [description, setDescription] = useState(w.description ?? '');
  const [nodes, setNodes] = useState<DraftNode[]>(
    w.nodes.map((n) => ({ key: nextKey++, type: n.type, config: n.config === '{}' ? '' : prettify(n.config) })),
  );
  const [problems, setProblems] = useState<string[]>([]);
  const action = useAction();
  const save = async () => {
    const errs: string[] = [];
    if (!name.trim()) errs.push('Give the workflow a name.');
    if (name.trim().length > LIMITS.workflowNameMax) errs.push(`The name is longer than ${LIMITS.workflowNameMax} characters.`);
    if (description.length > LIMITS.workflowDescriptionMax)
      errs.push(`The description is longer than ${LIMITS.workflowDescriptionMax} characters.`);
    if (nodes.length > LIMITS.workflowNodesMax) errs.push(`At most ${LIMITS.workflowNodesMax} nodes.`);
    const parsed = nodes.map((n, i) => {
      const p = parseJson(n.config);
      if (p.error) errs.push(`Node ${i + 1}: the config is not valid JSON (${p.error}).`);
      else if (!p.value || typeof p.value !== 'object' || Array.isArray(p.value))
        errs.push(`Node ${i + 1}: the config must be a JSON object.`);
      else if (JSON.stringify(p.value).length > LIMITS.workflowNodeConfigMax) errs.push(`Node ${i + 1}: the config is too large.`);
      return { type: n.type, config: (p.value ?? {}) as Record<string, unknown>, position: { x: i * 200, y: 0 } };
    });
    setProblems(errs);
    if (errs.length) return;
    const ok = await action.run(() =>
      call(
        api.PUT('/api/workflows/{workflowId}', {
          params: { path: { workflowId: w.id } },
          body: { name: name.trim(), description: description || null, nodes: parsed },
        }),
      ),
    );
    if (ok) await onDone();
  };
  return (
    <div className="editor">
      <Field label="Name">{({ id }) => <input id={id} value={name} onChange={(e) => setName(e.target.value)} />}</Field>
      <Field label="Description">
        {({ id }) => <input id={id} value={description} onChange={(e) => setDescription(e.target.value)} />}
      </Field>
      <h3>Nodes</h3>
      {nodes.length === 0 && <Empty>No nodes. Add one below.</Empty>}
      <ol className="nodes">
        {nodes.map((n, i) => (
          <li key={n.key} className="node">
            <Field label={`Node ${i + 1} type`}>
              {({ id }) => (
                <select
                  id={id}
                  value={n.type}
                  onChange={(e) => setNodes(nodes.map((x, j) => (j === i ? { ...x, type: e.target.value as NodeType } : x)))}
                >
                  {NODE_TYPES.map((t) => (
                    <option key={t}>{t}</option>
                  ))}
                </select>
              )}
            </Field>
            <Field label={`Node ${i + 1} config (JSON)`}>
              {({ id }) => (
                <textarea
                  id={id}
                  className="code"
                  rows={3}
                  value={n.config}
                  placeholder="{}"
                  spellCheck={false}
                  onChange={(e) => setNodes(nodes.map((x, j) => (j === i ? { ...x, config: e.target.value } : x)))}
                />
              )}
            </Field>
            <Button label={`Remove node ${i + 1}`} onClick={() => setNodes(nodes.filter((_, j) => j !== i))}>
              Remove
            </Button>
          </li>
        ))}
      </ol>
      <div className="row">
        <Button onClick={() => setNodes([...nodes, { key: nextKey++, type: 'action', config: '' }])}>Add node</Button>
        <Button kind="primary" busy={action.busy} onClick={save}>
          Save workflow
        </Button>
        <Button onClick={() => void onDone()}>Cancel</Button>
      </div>
      {problems.map((p) => (
        <p key={p} className="error" role="alert">
          {p}
        </p>
      ))}
      <ErrorText error={action.error} />
    </div>
  );
}

const prettify = (s: string) => {
  try {
    return JSON.stringify(JSON.parse(s), null, 2);
  } catch {
    return s;
  }
};
