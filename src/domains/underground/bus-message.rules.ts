/**
 * The Underground bus message (§4.15 POST /api/underground/bus/send, §5 "Message signature") and
 * its signature. The specification leaves the shape "not shown"; the system it documents uses an
 * `AgentMessage` `{messageId, action, from, to, payload, timestamp, signature}` signed with EIP-191
 * (`personal_sign`) by the sending agent's wallet over the keccak256 of the message's JSON without
 * its `signature` field. That JSON is fixed here so any signer can reproduce it byte for byte:
 *
 *   JSON.stringify({ messageId, action, from, to, payload, timestamp })
 *
 * keys in exactly that order, no whitespace, `payload` as JSON.stringify writes the parsed value
 * (its keys in the order they were sent, JavaScript's rule: integer-like keys first). The hash is
 * signed as 32 raw bytes: `account.signMessage({ message: { raw: keccak256(toBytes(json)) } })`.
 */
import type { Hex } from 'viem';
import { viem } from '../../lib/viem.ts';

/** How far a message's `timestamp` may be from the server's clock, either way (replays of older messages are refused). */
export const BUS_MESSAGE_MAX_AGE_MS = 5 * 60_000;

export type AgentMessage = {
  messageId: string;
  action: string;
  /** the sending agent's id; its Underground wallet signs */
  from: string;
  /** the recipient agent's id */
  to: string;
  payload: Record<string, unknown>;
  /** milliseconds since the epoch when the sender signed */
  timestamp: number;
  /** 0x-prefixed 65-byte EIP-191 signature */
  signature: Hex;
};

/** The exact string whose keccak256 is signed. */
export function canonicalMessageJson(m: Omit<AgentMessage, 'signature'>): string {
  return JSON.stringify({
    messageId: m.messageId,
    action: m.action,
    from: m.from,
    to: m.to,
    payload: m.payload,
    timestamp: m.timestamp,
  });
}

/** keccak256 of canonicalMessageJson (viem loads on first use: src/lib/viem.ts). */
export async function messageHash(m: Omit<AgentMessage, 'signature'>): Promise<Hex> {
  const { keccak256, toBytes } = await viem();
  return keccak256(toBytes(canonicalMessageJson(m)));
}

/** The address that signed the message, or null when the signature is not a valid EIP-191 signature. */
export async function recoverSigner(m: AgentMessage): Promise<Hex | null> {
  try {
    const { recoverMessageAddress } = await viem();
    return await recoverMessageAddress({ message: { raw: await messageHash(m) }, signature: m.signature });
  } catch {
    return null;
  }
}
