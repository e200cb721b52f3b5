/**
 * The Files tab: the agent's workspace through the §4.17 file explorer on the web app
 * (`/api/browse/*?agentId=`, docs/agents.md "File explorer"): a tree with folders to expand, a text
 * file to view, edit and save, and the workspace's git status with the diff of each changed file,
 * a commit of everything and the last commits. What the server refuses (a file over 1 MB, a link,
 * git without a sandbox) is shown in the server's words.
 */
import { type FormEvent, useEffect, useState } from 'react';
import { ApiError, api, call } from '../../api/client.ts';
import { Button, Empty, ErrorText, Field, formatDate, Notice, Section, Spinner, useAction, useData } from '../../ui.tsx';

type TreeNode = { type: 'file' | 'folder'; name: string; path: string; children?: TreeNode[] };

/** the deepest tree the explorer lists (§4.17 `depth` cap) */
const TREE_DEPTH = 4;

/**
 * Reads `load`'s data again when `version` moves (after a write or a commit), keeping what is shown
 * meanwhile: useData's own deps would reset it, and with it the open folders and the last notice.
 */
function useReloadOn(version: number, reload: () => Promise<void>) {
  useEffect(() => {
    if (version > 0) void reload();
  }, [version, reload]);
}

export function Files({ agentId }: { agentId: string }) {
  const [open, setOpen] = useState<string | null>(null);
  // bumped after every write or commit: the tree and git status are read again
  const [version, setVersion] = useState(0);
  const changed = () => setVersion((v) => v + 1);
  return (
    <>
      <FileTree agentId={agentId} version={version} open={open} onOpen={setOpen} onCreated={changed} />
      {open && <FileEditor key={open} agentId={agentId} path={open} onSaved={changed} />}
      <Git agentId={agentId} version={version} onCommitted={changed} />
    </>
  );
}

function FileTree(props: { agentId: string; version: number; open: string | null; onOpen: (path: string) => void; onCreated: () => void }) {
  const { agentId } = props;
  const tree = useData(
    async () => (await call(api.GET('/api/browse/tree', { params: { query: { agentId, depth: TREE_DEPTH } } }))).root as TreeNode,
    [agentId],
  );
  useReloadOn(props.version, tree.reload);
  const [expanded, setExpanded] = useState<ReadonlySet<string>>(new Set());
  const toggle = (path: string) =>
    setExpanded((s) => {
      const next = new Set(s);
      if (!next.delete(path)) next.add(path);
      return next;
    });
  return (
    <Section title="Files" actions={<Button onClick={tree.reload}>Refresh</Button>}>
      {tree.loading && !tree.data && <Spinner label="Loading the workspace…" />}
      <ErrorText error={tree.error} />
      {tree.data &&
        (tree.data.children === undefined ? (
          // the server lists nothing it may not open: before the agent's first start its folder is not yet the agent's
          <Empty>The workspace cannot be listed yet: the agent has not started. Refresh once it runs.</Empty>
        ) : tree.data.children.length ? (
          <ul className="file-tree" aria-label="Workspace">
            <TreeItems nodes={tree.data.children} expanded={expanded} toggle={toggle} open={props.open} onOpen={props.onOpen} />
          </ul>
        ) : (
          <Empty>The workspace is empty.</Empty>
        ))}
      <NewFile
        agentId={agentId}
        onCreated={(path) => {
          props.onCreated();
          props.onOpen(path);
        }}
      />
    </Section>
  );
}

function TreeItems(props: {
  nodes: TreeNode[];
  expanded: ReadonlySet<string>;
  toggle: (path: string) => void;
  open: string | null;
  onOpen: (path: string) => void;
}) {
  return (
    <>
      {props.nodes.map((n) =>
        n.type === 'folder' ? (
          <li key={n.path}>
            <button type="button" className="tree-folder" aria-expanded={props.expanded.has(n.path)} onClick={() => props.toggle(n.path)}>
              <span aria-hidden="true">{props.expanded.has(n.path) ? '▾ ' : '▸ '}</span>
              {n.name}/
            </button>
            {props.expanded.has(n.path) && (
              <ul>
                {n.children === undefined ? (
                  <li className="muted">Deeper folders are not listed here ({TREE_DEPTH} levels at most).</li>
                ) : n.children.length === 0 ? (
                  <li className="muted">Empty folder</li>
                ) : (
                  <TreeItems {...props} nodes={n.children} />
                )}
              </ul>
            )}
          </li>
        ) : (
          <li key={n.path}>
            <button
              type="button"
              className="tree-file"
              aria-current={props.open === n.path ? 'true' : undefined}
              onClick={() => props.onOpen(n.path)}
            >
              {n.name}
            </button>
          </li>
        ),
      )}
    </>
  );
}

function NewFile({ agentId, onCreated }: { agentId: string; onCreated: (path: string) => void }) {
  const [path, setPath] = useState('');
  const action = useAction();
  const create = async (e: FormEvent) => {
    e.preventDefault();
    const p = path.trim();
    if (!p) return;
    const ok = await action.run(() =>
      call(api.POST('/api/browse/write', { params: { query: { agentId } }, body: { path: p, content: '' } })),
    );
    if (ok) {
      setPath('');
      onCreated(p);
    }
  };
  return (
    <form className="inline-form" onSubmit={create}>
      <Field label="New file" hint="A path inside the workspace, e.g. notes/todo.md; folders are created">
        {({ id, describedBy }) => <input id={id} value={path} onChange={(e) => setPath(e.target.value)} aria-describedby={describedBy} />}
      </Field>
      <Button type="submit" busy={action.busy} disabled={!path.trim()}>
        Create file
      </Button>
      <ErrorText error={action.error} />
    </form>
  );
}

/** Text the explorer would damage if saved: NUL bytes, or bytes that were not UTF-8 (read as U+FFFD). */
const isBinary = (content: string) => content.includes('\u0000') || content.includes('\uFFFD');

function FileEditor({ agentId, path, onSaved }: { agentId: string; path: string; onSaved: () => void }) {
  const file = useData(() => call(api.GET('/api/browse/read', { params: { query: { agentId, path } } })), [agentId, path]);
  const [draft, setDraft] = useState<string | null>(null);
  const [saved, setSaved] = useState<{ size: number } | null>(null);
  const action = useAction();
  if (file.loading && !file.data) return <Spinner label={`Opening ${path}…`} />;
  if (!file.data)
    return (
      <Section title={path}>
        <ErrorText error={file.error} />
      </Section>
    );
  const content = draft ?? file.data.content;
  const binary = isBinary(file.data.content);
  const save = async (e: FormEvent) => {
    e.preventDefault();
    setSaved(null);
    let size = 0;
    const ok = await action.run(async () => {
      size = (await call(api.POST('/api/browse/write', { params: { query: { agentId } }, body: { path, content } }))).size;
    });
    if (ok) {
      setSaved({ size });
      setDraft(null);
      await file.reload();
      onSaved();
    }
  };
  return (
    <Section title={path}>
      <p className="muted">
        {file.data.size} bytes · modified {formatDate(file.data.modified)}
        {draft !== null && draft !== file.data.content ? ' · unsaved changes' : ''}
      </p>
      {binary ? (
        <Notice kind="warning">This file is not text (binary content); it is not shown or edited here.</Notice>
      ) : (
        <form onSubmit={save}>
          <Field label={`Content of ${path}`}>
            {({ id }) => (
              <textarea
                id={id}
                className="code file-content"
                rows={20}
                spellCheck={false}
                value={content}
                onChange={(e) => {
                  setDraft(e.target.value);
                  setSaved(null);
                }}
              />
            )}
          </Field>
          <Button type="submit" kind="primary" busy={action.busy}>
            Save file
          </Button>
        </form>
      )}
      <ErrorText error={action.error} />
      {saved && (
        <Notice kind="success">
          Saved {path} ({saved.size} bytes).
        </Notice>
      )}
    </Section>
  );
}

function Git({ agentId, version, onCommitted }: { agentId: string; version: number; onCommitted: () => void }) {
  const status = useData(() => call(api.GET('/api/browse/git-status', { params: { query: { agentId } } })), [agentId]);
  useReloadOn(version, status.reload);
  const [diffOf, setDiffOf] = useState<string | null>(null);
  const shown = status.data?.changes.find((c) => c.path === diffOf);
  return (
    <Section title="Git" actions={<Button onClick={status.reload}>Refresh</Button>}>
      {status.loading && !status.data && <Spinner label="Reading git status…" />}
      {status.error instanceof ApiError && status.error.status === 503 ? (
        <Notice kind="warning">Git is not available for this agent on this server: {status.error.message}</Notice>
      ) : (
        <ErrorText error={status.error} />
      )}
      {status.data && !status.data.isGitRepo && <GitInit agentId={agentId} onInitialised={status.reload} />}
      {status.data?.isGitRepo && (
        <>
          <p className="muted">
            Branch {status.data.branch ?? '(detached)'} · {status.data.remote ? `remote ${status.data.remote}` : 'no remote'}
          </p>
          <h3>Changed files</h3>
          {status.data.changes.length === 0 ? (
            <Empty>No changes since the last commit.</Empty>
          ) : (
            <ul className="git-changes">
              {status.data.changes.map((c) => (
                <li key={c.path}>
                  <button type="button" aria-pressed={diffOf === c.path} onClick={() => setDiffOf(diffOf === c.path ? null : c.path)}>
                    <span className="git-status code" title={`git status ${c.status}`}>
                      {c.status}
                    </span>{' '}
                    {c.path}
                  </button>
                </li>
              ))}
            </ul>
          )}
          {shown && <Diff key={`${shown.path}:${version}`} agentId={agentId} path={shown.path} untracked={shown.status === '??'} />}
          <Commit agentId={agentId} hasChanges={status.data.hasChanges} onCommitted={onCommitted} />
          <Log agentId={agentId} version={version} />
        </>
      )}
    </Section>
  );
}

/**
 * A workspace that is not a repository yet: one button makes it one (POST /api/browse/git-init, git
 * run as the agent in its sandbox), with a .gitignore that leaves the runtime's logs and
 * configuration out of commits.
 */
function GitInit({ agentId, onInitialised }: { agentId: string; onInitialised: () => Promise<void> }) {
  const action = useAction();
  const init = () =>
    action.run(async () => {
      await call(api.POST('/api/browse/git-init', { params: { query: { agentId } } }));
      await onInitialised();
    });
  return (
    <>
      <Notice kind="info">
        The workspace is not a git repository yet, so there is no status or diff to show. Initialise one to track the agent's changes and
        commit them here; its <code>.gitignore</code> leaves out the runtime's <code>logs/</code> and <code>openclaw.json</code>.
      </Notice>
      <Button kind="primary" busy={action.busy} onClick={() => void init()}>
        Initialise a repository
      </Button>
      <ErrorText error={action.error} />
    </>
  );
}

function Diff({ agentId, path, untracked }: { agentId: string; path: string; untracked: boolean }) {
  const diff = useData(() => call(api.GET('/api/browse/git-diff', { params: { query: { agentId, path } } })), [agentId, path]);
  if (diff.loading && !diff.data) return <Spinner label={`Reading the diff of ${path}…`} />;
  if (!diff.data) return <ErrorText error={diff.error} />;
  const parts = [
    ['Staged', diff.data.staged],
    ['Not staged', diff.data.unstaged],
  ] as const;
  return (
    <div className="git-diff">
      <h3>Diff of {path}</h3>
      {!diff.data.staged && !diff.data.unstaged && (
        <Empty>
          {untracked ? 'No diff: the file is new to git (untracked); the next commit adds it.' : 'No diff to show for this file.'}
        </Empty>
      )}
      {parts.map(
        ([label, text]) =>
          text && (
            <section key={label} aria-label={`${label} diff of ${path}`}>
              <h4>{label}</h4>
              {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable by keyboard (axe scrollable-region-focusable) */}
              <pre className="diff code" tabIndex={0}>
                {text
                  .replace(/\n$/, '')
                  .split('\n')
                  .map((line, i) => (
                    // biome-ignore lint/suspicious/noArrayIndexKey: lines of one fixed text, never reordered
                    <span key={i} className={line.startsWith('+') ? 'diff-add' : line.startsWith('-') ? 'diff-del' : undefined}>
                      {line}
                      {'\n'}
                    </span>
                  ))}
              </pre>
            </section>
          ),
      )}
    </div>
  );
}

function Commit({ agentId, hasChanges, onCommitted }: { agentId: string; hasChanges: boolean; onCommitted: () => void }) {
  const [message, setMessage] = useState('');
  const [result, setResult] = useState<{ committed: boolean; pushed: boolean; hash: string | null } | null>(null);
  const action = useAction();
  // the last commit's notice stays until there is something new to commit
  useEffect(() => {
    if (hasChanges) setResult(null);
  }, [hasChanges]);
  const commit = async (e: FormEvent) => {
    e.preventDefault();
    setResult(null);
    const body = message.trim() ? { message: message.trim() } : {};
    let r: { committed: boolean; pushed: boolean; hash: string | null } | null = null;
    const ok = await action.run(async () => {
      r = await call(api.POST('/api/browse/git-sync', { params: { query: { agentId } }, body }));
    });
    if (ok && r) {
      setResult(r);
      setMessage('');
      onCommitted();
    }
  };
  return (
    <form className="inline-form" onSubmit={commit}>
      <Field label="Commit message" hint="Default: sync changes">
        {({ id, describedBy }) => (
          <input id={id} value={message} maxLength={1000} onChange={(e) => setMessage(e.target.value)} aria-describedby={describedBy} />
        )}
      </Field>
      <Button type="submit" busy={action.busy} disabled={!hasChanges}>
        Commit all changes
      </Button>
      <ErrorText error={action.error} />
      {result && (
        <Notice kind="success">
          {result.committed ? `Committed ${result.hash?.slice(0, 7) ?? ''}` : 'Nothing to commit'}
          {result.pushed ? ' and pushed.' : '.'}
        </Notice>
      )}
    </form>
  );
}

function Log({ agentId, version }: { agentId: string; version: number }) {
  const log = useData(() => call(api.GET('/api/browse/git-log', { params: { query: { agentId, limit: 10 } } })), [agentId]);
  useReloadOn(version, log.reload);
  return (
    <>
      <h3>Recent commits</h3>
      <ErrorText error={log.error} />
      {log.data &&
        (log.data.commits.length === 0 ? (
          <Empty>No commits yet.</Empty>
        ) : (
          <ul className="git-log">
            {log.data.commits.map((c) => (
              <li key={c.hash}>
                <code>{c.shortHash}</code> {c.subject}{' '}
                <span className="muted">
                  — {c.author}, {formatDate(c.date)}
                </span>
              </li>
            ))}
          </ul>
        ))}
    </>
  );
}
