/**
 * Pure rules of the channel service (docs/channels.md): who may talk to an agent on a channel, the
 * session a sender's messages belong to, and how a long reply is cut for the provider.
 */
import type { ChannelKind, InboundMessage } from './connector.ts';

/**
 * `allowFrom` as stored: trimmed, user ids as they are and @names lower-cased with their `@`, no
 * duplicates, no empty entries. A name without `@` that is not a number is taken as an @name.
 */
export function normaliseAllowFrom(list: readonly string[]): string[] {
  const out = new Set<string>();
  for (const raw of list) {
    const v = raw.trim();
    if (!v) continue;
    out.add(/^-?\d+$/.test(v) ? v : `@${v.replace(/^@/, '').toLowerCase()}`);
  }
  return [...out];
}

/** §2 `channels.<name>.allowFrom`: empty allows every sender; else the sender's id or @name must be listed. */
export function senderAllowed(allowFrom: readonly string[], sender: InboundMessage['sender']): boolean {
  if (allowFrom.length === 0) return true;
  if (allowFrom.includes(sender.id)) return true;
  return !!sender.username && allowFrom.includes(`@${sender.username.toLowerCase()}`);
}

/** §2 `session.dmScope: per-channel-peer`: each person on each channel has a session of their own. */
export const peerSessionKey = (kind: ChannelKind, senderId: string) => `${kind}:${senderId}`;

/**
 * A reply cut into messages of at most `max` characters, preferring to cut after a paragraph, then a
 * line, then a space, in the last fifth of each piece; a word longer than that is cut where it must.
 */
export function splitReply(text: string, max: number): string[] {
  const pieces: string[] = [];
  let rest = text.trim();
  while (rest.length > max) {
    const window = rest.slice(0, max);
    const floor = Math.floor(max * 0.8);
    let cut = -1;
    for (const sep of ['\n\n', '\n', ' ']) {
      const at = window.lastIndexOf(sep);
      if (at >= floor) {
        cut = at + sep.length;
        break;
      }
    }
    if (cut <= 0) cut = max;
    pieces.push(rest.slice(0, cut).trimEnd());
    rest = rest.slice(cut).trimStart();
  }
  if (rest) pieces.push(rest);
  return pieces;
}

/** The sentence a sender not on the allow list gets, with the code the owner approves (OpenClaw's pairing). */
export const pairingReply = (code: string) =>
  `This agent only talks to people its owner allowed. To ask for access, give the owner this pairing code: ${code} ` +
  '(they approve it on the Channels tab of the agent page; it expires in an hour).';

/**
 * A platform channel as OpenClaw's own configuration (`channels.telegram` / `channels.discord`,
 * docs/channels.md "OpenClaw"): the specification's empty allow list allows everyone, which is
 * OpenClaw's `open` policy (it requires `allowFrom: ["*"]`); a list is OpenClaw's `pairing`, which
 * also offers strangers a code as the platform does.
 */
export function openClawChannel(c: { kind: ChannelKind; token: string; allowFrom: readonly string[]; enabled: boolean }) {
  const access = c.allowFrom.length === 0 ? { dmPolicy: 'open', allowFrom: ['*'] } : { dmPolicy: 'pairing', allowFrom: [...c.allowFrom] };
  return c.kind === 'telegram' ? { enabled: c.enabled, botToken: c.token, ...access } : { enabled: c.enabled, token: c.token, ...access };
}
