/**
 * The Channels tab: the agent's Telegram and Discord bots, run by the platform (docs/channels.md).
 * Connect one with its token (checked with the provider; the token is never shown again, only its
 * last characters), see its status, edit the allow list (§2 allowFrom: empty allows everyone), read
 * who wrote recently and approve the pairing codes strangers were given.
 */
import { type FormEvent, useEffect, useState } from 'react';
import { api, call } from '../../api/client.ts';
import type { paths } from '../../api/openapi.gen.ts';
import {
  Badge,
  Button,
  DataTable,
  Empty,
  ErrorText,
  formatDate,
  Notice,
  Section,
  Spinner,
  TextField,
  useAction,
  useData,
} from '../../ui.tsx';

type Listing = paths['/api/agents/{id}/channels']['get']['responses']['200']['content']['application/json'];
type Channel = Listing['channels'][number];
type Kind = 'telegram' | 'discord';

const KINDS: { kind: Kind; name: string; where: string }[] = [
  { kind: 'telegram', name: 'Telegram', where: 'the token @BotFather gave you (123456:ABC…)' },
  { kind: 'discord', name: 'Discord', where: "the bot's token from the Developer Portal (Message Content intent on)" },
];

/** "a, @b  c" → ["a", "@b", "c"] */
const parseList = (text: string) => text.split(/[\s,]+/).filter(Boolean);

function ChannelCard(props: {
  agentId: string;
  kind: Kind;
  name: string;
  where: string;
  channel: Channel | undefined;
  onChanged: () => Promise<void>;
}) {
  const { agentId, kind, channel } = props;
  const [token, setToken] = useState('');
  const [allow, setAllow] = useState((channel?.allowFrom ?? []).join(', '));
  // the list changes on the server too (an approved pairing code): show what is stored whenever it does
  const stored = (channel?.allowFrom ?? []).join(', ');
  useEffect(() => setAllow(stored), [stored]);
  const [done, setDone] = useState<string>();
  const save = useAction();
  const remove = useAction();
  const path = { params: { path: { id: agentId, kind } } };

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setDone(undefined);
    const body = { ...(token.trim() ? { botToken: token.trim() } : {}), allowFrom: parseList(allow) };
    if (await save.run(() => call(api.PUT('/api/agents/{id}/channels/{kind}', { ...path, body })))) {
      setToken('');
      setDone(token.trim() ? 'Connected: the bot answers within a few seconds.' : 'Saved.');
      await props.onChanged();
    }
  };
  const toggle = async () => {
    if (await save.run(() => call(api.PUT('/api/agents/{id}/channels/{kind}', { ...path, body: { enabled: !channel!.enabled } }))))
      await props.onChanged();
  };
  const disconnect = async () => {
    if (await remove.run(() => call(api.DELETE('/api/agents/{id}/channels/{kind}', path)))) {
      setDone('Disconnected: the bot is stopped and its token forgotten.');
      await props.onChanged();
    }
  };

  return (
    <Section title={props.name} actions={channel ? <Badge value={channel.status} /> : undefined}>
      {channel ? (
        <p>
          Bot <strong>@{channel.bot?.username ?? '?'}</strong>, token {channel.tokenHint}.{' '}
          {channel.status === 'error' && channel.error ? <span className="field-error">{channel.error} (retrying)</span> : null}
        </p>
      ) : (
        <p className="muted">Not connected. The platform runs the bot for this agent; its token never reaches the agent.</p>
      )}
      <form onSubmit={submit} noValidate>
        <TextField
          label={channel ? 'New bot token (leave empty to keep the current one)' : 'Bot token'}
          hint={props.where}
          type="password"
          autoComplete="off"
          value={token}
          onChange={setToken}
        />
        <TextField
          label="Allowed senders"
          hint="User ids or @names, separated by commas; empty allows everyone. Others get a pairing code to give you."
          value={allow}
          onChange={setAllow}
        />
        <div className="row">
          <Button type="submit" kind="primary" busy={save.busy} disabled={!channel && !token.trim()}>
            {channel ? 'Save' : 'Connect'}
          </Button>
          {channel && (
            <Button onClick={toggle} busy={save.busy}>
              {channel.enabled ? 'Turn off' : 'Turn on'}
            </Button>
          )}
          {channel && (
            <Button kind="danger" onClick={disconnect} busy={remove.busy}>
              Disconnect
            </Button>
          )}
        </div>
      </form>
      {done && <Notice kind="success">{done}</Notice>}
      <ErrorText error={save.error ?? remove.error} />
    </Section>
  );
}

export function Channels({ agentId }: { agentId: string }) {
  const data = useData(async () => call(api.GET('/api/agents/{id}/channels', { params: { path: { id: agentId } } })), [agentId], {
    pollMs: 5000,
  });
  const approve = useAction();
  if (data.loading && !data.data) return <Spinner label="Loading the channels…" />;
  if (!data.data) return <ErrorText error={data.error} />;
  const { channels, senders, pairings } = data.data;
  const approveCode = async (kind: string, code: string) => {
    const path = { params: { path: { id: agentId, kind: kind as Kind, code } } };
    if (await approve.run(() => call(api.POST('/api/agents/{id}/channels/{kind}/pairings/{code}', path)))) await data.reload();
  };
  return (
    <>
      {KINDS.map((k) => (
        <ChannelCard key={k.kind} agentId={agentId} {...k} channel={channels.find((c) => c.kind === k.kind)} onChanged={data.reload} />
      ))}
      <Section title="Pairing requests">
        {pairings.length === 0 ? (
          <Empty>No one is waiting. A sender not on the allow list gets a code; it shows here for an hour.</Empty>
        ) : (
          <DataTable
            caption="Pairing codes waiting for approval"
            rows={pairings}
            rowKey={(p) => `${p.kind}-${p.code}`}
            columns={[
              { header: 'Channel', cell: (p) => p.kind },
              { header: 'Code', cell: (p) => <code>{p.code}</code> },
              { header: 'Sender', cell: (p) => (p.username ? `@${p.username} (${p.senderId})` : p.senderId) },
              { header: 'Expires', cell: (p) => formatDate(p.expiresAt) },
              {
                header: 'Approve',
                hideHeader: true,
                cell: (p) => (
                  <Button kind="primary" busy={approve.busy} onClick={() => approveCode(p.kind, p.code)}>
                    Approve
                  </Button>
                ),
              },
            ]}
          />
        )}
        <ErrorText error={approve.error} />
      </Section>
      <Section title="Recent senders">
        {senders.length === 0 ? (
          <Empty>No messages yet.</Empty>
        ) : (
          <DataTable
            caption="People who wrote to the agent's bots"
            rows={senders}
            rowKey={(s) => `${s.kind}-${s.id}`}
            columns={[
              { header: 'Channel', cell: (s) => s.kind },
              {
                header: 'Sender',
                cell: (s) => [s.displayName, s.username ? `@${s.username}` : null, `(${s.id})`].filter(Boolean).join(' '),
              },
              { header: 'Messages', numeric: true, cell: (s) => s.messages },
              { header: 'Allowed', cell: (s) => (s.allowed ? 'yes' : 'no') },
              { header: 'Last message', cell: (s) => formatDate(s.lastSeenAt) },
            ]}
          />
        )}
      </Section>
    </>
  );
}
