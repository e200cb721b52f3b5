/** For admins (docs/admin.md): server health, and every user with their plan and admin right. */
import { useState } from 'react';
import { api, call } from '../api/client.ts';
import { useSession } from '../session.tsx';
import { Badge, Button, ErrorText, formatDate, Section, Spinner, useAction, useData } from '../ui.tsx';
import { PLANS } from './settings.tsx';

const PAGE = 50;
type Plan = (typeof PLANS)[number]['value'];

export function AdminPage() {
  const { user } = useSession();
  const [offset, setOffset] = useState(0);
  const health = useData(() => call(api.GET('/api/admin/health')), [], { pollMs: 10000 });
  const users = useData(() => call(api.GET('/api/admin/users', { params: { query: { limit: PAGE, offset } } })), [offset]);
  const change = useAction();
  if (!user?.isAdmin) return <ErrorText error={new Error('This page is for admins.')} />;
  const h = health.data;
  const update = (id: string, body: { plan?: Plan; isAdmin?: boolean }) =>
    change.run(async () => {
      await call(api.PATCH('/api/admin/users/{id}', { params: { path: { id } }, body }));
      await users.reload();
    });
  return (
    <>
      <Section title="Server health">
        {health.loading && !h ? <Spinner /> : null}
        <ErrorText error={!h ? health.error : null} />
        {h && (
          <dl className="stats">
            <div>
              <dt>Health</dt>
              <dd>
                <Badge value={h.health} />
              </dd>
            </div>
            <div>
              <dt>CPU</dt>
              <dd>
                {h.cpu.percent.toFixed(0)}% of {h.cpu.cores} cores
              </dd>
            </div>
            <div>
              <dt>Memory</dt>
              <dd>{h.memory.percent.toFixed(0)}%</dd>
            </div>
            <div>
              <dt>Platform process</dt>
              <dd>{(h.process.rssBytes / 1048576).toFixed(0)} MB</dd>
            </div>
            <div>
              <dt>Uptime</dt>
              <dd>{(h.process.uptimeSeconds / 3600).toFixed(1)} h</dd>
            </div>
          </dl>
        )}
      </Section>
      <Section title="Users">
        {users.loading && !users.data ? <Spinner /> : null}
        <ErrorText error={(!users.data ? users.error : null) ?? change.error} />
        {users.data && (
          <>
            <div className="table-wrap">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Email</th>
                    <th scope="col">Name</th>
                    <th scope="col">Plan</th>
                    <th scope="col">Subscription</th>
                    <th scope="col">Admin</th>
                    <th scope="col">Joined</th>
                  </tr>
                </thead>
                <tbody>
                  {users.data.users.map((u) => (
                    <tr key={u.id}>
                      <td>{u.email}</td>
                      <td>{u.name}</td>
                      <td>
                        <label className="sr-only" htmlFor={`plan-${u.id}`}>
                          Plan of {u.email}
                        </label>
                        <select
                          id={`plan-${u.id}`}
                          value={u.plan}
                          disabled={change.busy}
                          onChange={(e) => void update(u.id, { plan: e.target.value as Plan })}
                        >
                          {PLANS.map((p) => (
                            <option key={p.value} value={p.value}>
                              {p.label}
                            </option>
                          ))}
                        </select>
                      </td>
                      <td>
                        <Badge value={u.subscriptionStatus} />
                      </td>
                      <td>
                        <input
                          type="checkbox"
                          aria-label={`${u.email} is an admin`}
                          checked={u.isAdmin}
                          disabled={change.busy || u.id === user.id}
                          onChange={(e) => void update(u.id, { isAdmin: e.target.checked })}
                        />
                      </td>
                      <td>{formatDate(u.createdAt)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            <div className="row">
              <span className="muted">
                {users.data.total === 0 ? 'No users' : `${offset + 1}–${Math.min(offset + PAGE, users.data.total)} of ${users.data.total}`}
              </span>
              <Button disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>
                Previous
              </Button>
              <Button disabled={offset + PAGE >= users.data.total} onClick={() => setOffset(offset + PAGE)}>
                Next
              </Button>
            </div>
          </>
        )}
      </Section>
    </>
  );
}
