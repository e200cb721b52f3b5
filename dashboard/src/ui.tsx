/** Shared pieces of every page: links, buttons, fields, states (loading, empty, error), data hooks. */
import { type InputHTMLAttributes, type ReactNode, type Ref, useCallback, useEffect, useId, useRef, useState } from 'react';
import { messageOf } from './api/client.ts';
import { onLinkClick } from './router.ts';

export function Link(props: { href: string; children: ReactNode; className?: string; current?: boolean }) {
  return (
    <a href={props.href} onClick={onLinkClick} className={props.className} aria-current={props.current ? 'page' : undefined}>
      {props.children}
    </a>
  );
}

export function Spinner({ label = 'Loading…' }: { label?: string }) {
  return (
    <p className="loading" role="status">
      <span className="spinner" aria-hidden="true" /> {label}
    </p>
  );
}

export function ErrorText({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p className="error" role="alert">
      {messageOf(error)}
    </p>
  );
}

export function Notice({ kind = 'info', children }: { kind?: 'info' | 'success' | 'warning'; children: ReactNode }) {
  return (
    <p className={`notice notice-${kind}`} role="status">
      {children}
    </p>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <div className="empty">{children}</div>;
}

/**
 * A labelled one-line input with its hint and error wired for screen readers (the Field around an
 * <input> that most forms repeat). Other input attributes pass through (inputMode, type, autoComplete…).
 */
export function TextField({
  label,
  hint,
  error,
  value,
  onChange,
  inputRef,
  ...input
}: {
  label: string;
  hint?: string;
  error?: string | undefined;
  value: string;
  onChange: (value: string) => void;
  inputRef?: Ref<HTMLInputElement>;
} & Omit<InputHTMLAttributes<HTMLInputElement>, 'value' | 'onChange' | 'id'>) {
  return (
    <Field label={label} hint={hint} error={error}>
      {({ id, describedBy, invalid }) => (
        <input
          {...input}
          id={id}
          ref={inputRef}
          value={value}
          onChange={(e) => onChange(e.target.value)}
          aria-describedby={describedBy}
          aria-invalid={invalid}
        />
      )}
    </Field>
  );
}

export function Field(props: {
  label: string;
  hint?: string;
  error?: string | undefined;
  children: (ids: { id: string; describedBy: string | undefined; invalid: boolean }) => ReactNode;
}) {
  const id = useId();
  const hintId = `${id}-hint`;
  const errId = `${id}-err`;
  const describedBy = [props.hint ? hintId : '', props.error ? errId : ''].filter(Boolean).join(' ') || undefined;
  return (
    <div className="field">
      <label htmlFor={id}>{props.label}</label>
      {props.children({ id, describedBy, invalid: Boolean(props.error) })}
      {props.hint && (
        <small id={hintId} className="hint">
          {props.hint}
        </small>
      )}
      {props.error && (
        <small id={errId} className="field-error">
          {props.error}
        </small>
      )}
    </div>
  );
}

export function Button(props: {
  children: ReactNode;
  onClick?: () => unknown;
  type?: 'button' | 'submit';
  kind?: 'primary' | 'secondary' | 'danger';
  busy?: boolean;
  disabled?: boolean;
  label?: string;
}) {
  return (
    <button
      type={props.type ?? 'button'}
      className={`btn btn-${props.kind ?? 'secondary'}`}
      onClick={props.onClick ? () => void props.onClick?.() : undefined}
      disabled={props.disabled || props.busy}
      aria-busy={props.busy || undefined}
      aria-label={props.label}
    >
      {props.busy ? <span className="spinner" aria-hidden="true" /> : null}
      {props.children}
    </button>
  );
}

/** One column of a DataTable: its header (also the label of the cell when rows become cards) and how a row fills it. */
export interface Column<T> {
  header: string;
  cell: (row: T) => ReactNode;
  /** the header is read by screen readers but not shown (an actions column) */
  hideHeader?: boolean;
  /** a numeric column: right-aligned in the wide layout */
  numeric?: boolean;
}

/**
 * A table that stays usable on a phone: a normal table when there is room; below 600 px
 * each row becomes a stacked card whose cells carry their column header as a label (`data-label`, drawn by
 * styles.css), so the page never scrolls sideways.
 */
export function DataTable<T>(props: { columns: Column<T>[]; rows: readonly T[]; rowKey: (row: T) => string; caption?: string }) {
  return (
    <div className="table-wrap">
      {/* explicit roles: Chromium and Safari drop table semantics from cells styled display:block (the card layout) */}
      {/* biome-ignore lint/a11y/noRedundantRoles: kept for the card layout (see above) */}
      <table className="data-table" role="table">
        {props.caption && <caption className="sr-only">{props.caption}</caption>}
        <thead>
          {/* biome-ignore lint/a11y/noRedundantRoles: kept for the card layout (see above) */}
          <tr role="row">
            {props.columns.map((c) => (
              // biome-ignore lint/a11y/noRedundantRoles: kept for the card layout (see above)
              <th key={c.header} scope="col" role="columnheader" className={c.numeric ? 'num' : undefined}>
                {c.hideHeader ? <span className="sr-only">{c.header}</span> : c.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.rows.map((row) => (
            // biome-ignore lint/a11y/noRedundantRoles: kept for the card layout (see above)
            <tr key={props.rowKey(row)} role="row">
              {props.columns.map((c) => (
                // biome-ignore lint/a11y/noRedundantRoles: kept for the card layout (see above)
                <td key={c.header} role="cell" data-label={c.hideHeader ? undefined : c.header} className={c.numeric ? 'num' : undefined}>
                  {c.cell(row)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function Badge({ value }: { value: string | null | undefined }) {
  const v = value ?? 'unknown';
  return <span className={`badge badge-${v.replace(/[^a-z_]/gi, '')}`}>{v.replace(/_/g, ' ')}</span>;
}

export function Section({ title, children, actions }: { title: string; children: ReactNode; actions?: ReactNode }) {
  const id = useId();
  return (
    <section className="card" aria-labelledby={id}>
      <div className="card-head">
        <h2 id={id}>{title}</h2>
        {actions}
      </div>
      {children}
    </section>
  );
}

/** Loads data on mount (and when `deps` change), optionally polling; `reload` refetches. */
export function useData<T>(load: () => Promise<T>, deps: unknown[] = [], options: { pollMs?: number } = {}) {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const loadRef = useRef(load);
  loadRef.current = load;
  const reload = useCallback(async () => {
    try {
      const data = await loadRef.current();
      setState({ data, loading: false });
    } catch (error) {
      setState((s) => ({ ...s, error, loading: false }));
    }
  }, []);
  // the caller's `deps` (ids, numbers) decide when to reload, like useEffect's own list
  const depsKey = JSON.stringify(deps);
  // biome-ignore lint/correctness/useExhaustiveDependencies: depsKey stands for `deps`, which the effect does not read
  useEffect(() => {
    setState({ loading: true });
    void reload();
    if (!options.pollMs) return;
    const t = setInterval(() => {
      if (document.visibilityState === 'visible') void reload();
    }, options.pollMs);
    return () => clearInterval(t);
  }, [depsKey, reload, options.pollMs]);
  return { ...state, reload };
}

/** Runs an action with a busy flag and an error to show; resolves to whether it succeeded. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = useCallback(async (fn: () => Promise<unknown>) => {
    setBusy(true);
    setError(null);
    try {
      await fn();
      return true;
    } catch (err) {
      setError(err);
      return false;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run, setError };
}

export const formatDate = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—');
export const formatUsd = (n: number) => (n < 0.01 && n > 0 ? `$${n.toFixed(6)}` : `$${n.toFixed(2)}`);

export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <Button
      onClick={async () => {
        try {
          await navigator.clipboard.writeText(text);
          setCopied(true);
          setTimeout(() => setCopied(false), 2000);
        } catch {
          setCopied(false);
        }
      }}
    >
      {copied ? 'Copied' : label}
    </Button>
  );
}

/** A configuration typed as JSON: the object, or the sentence to show under the field. */
export function parseJsonObject(text: string): { value: Record<string, unknown> } | { error: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    return { error: `Not valid JSON: ${messageOf(err)}` };
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return { error: 'The configuration must be a JSON object ({ … }).' };
  return { value: parsed as Record<string, unknown> };
}
