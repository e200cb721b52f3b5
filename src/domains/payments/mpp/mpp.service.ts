/**
 * MPP, the Machine Payments Protocol (§4.8; the `Payment` HTTP authentication scheme,
 * docs/payments.md "MPP"). The 402 challenge names amount, currency (token address), recipient,
 * description, a nonce and its expiry. The nonce is HMAC-signed and carries its own expiry and
 * terms, so issuing a challenge writes nothing; it is spent once, in PostgreSQL (mpp_payments:
 * UNIQUE nonce, UNIQUE transaction, UNIQUE credential).
 *
 * Credential (`Authorization: Payment <credential>`): base64url of the JSON
 * `{"challenge":{"nonce":"…"},"payload":{"type":"hash","hash":"0x<tx hash>","signature":"0x…"},
 * "source":"did:pkh:eip155:<chain id>:<payer address>"}` — the payer sent the token transfer
 * themselves, names the transaction by its hash, and proves they are its sender with an EIP-191
 * signature of `mppProofMessage(nonce, hash)` by the `source` address (a plain account, or a smart
 * wallet through ERC-1271/ERC-6492 on the chain). A transaction hash is public the moment it is
 * broadcast; without the signature anyone could claim someone else's transfer with a challenge
 * of their own. It pays when the transaction is confirmed (MPP_CONFIRMATIONS) on TEMPO_RPC_URL,
 * succeeded, was mined after the challenge was issued, and moved at least `amount` of
 * MPP_CURRENCY from the source to MPP_RECIPIENT. (`source` follows mppx's `did:pkh` convention.)
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import type { Hex, PublicClient } from 'viem';
import type { DB } from '../../../db/schema.ts';
import { sha256 } from '../../../lib/crypto.ts';
import { microsToUsd } from '../../../lib/money.ts';
import { viem } from '../../../lib/viem.ts';
import type { MppMethod } from '../paid-calls/paid-calls.service.ts';

/**
 * How far a block's timestamp may lie before the challenge it pays (ms). A block's time is the
 * chain's, in whole seconds, set by its producer (a slot's start on Ethereum-like chains, seconds
 * before the transactions in it arrived; anvil floors its elapsed time), not this server's clock:
 * a transfer sent after the challenge was read as mined a second before it. A transfer still pays
 * once (its hash is UNIQUE) and only for the payer who signed the nonce with it.
 */
const CHAIN_CLOCK_SKEW_MS = 15_000;

// event Transfer(address indexed from, address indexed to, uint256 value), as the ABI item viem's parseAbiItem makes of it
const transferEvent = {
  type: 'event',
  name: 'Transfer',
  inputs: [
    { indexed: true, name: 'from', type: 'address' },
    { indexed: true, name: 'to', type: 'address' },
    { indexed: false, name: 'value', type: 'uint256' },
  ],
} as const;

type Terms = { a: number; c: string; r: string; p: string; iat: number; exp: number; n: string };

/** What the payer signs (EIP-191 personal message): the challenge's nonce and the paying transaction. */
export const mppProofMessage = (nonce: string, txHash: string) =>
  `agent-platform MPP payment\nnonce: ${nonce}\ntransaction: ${txHash.toLowerCase()}`;

const SOURCE = /^did:pkh:eip155:(\d{1,12}):(0x[0-9a-fA-F]{40})$/;

export function createMppMethod(deps: {
  db: Kysely<DB>;
  secret: Buffer;
  recipient: string | undefined;
  currency: string;
  rpcUrl: string | undefined;
  challengeTtlMs: number;
  confirmations: number;
  now?: () => number;
  client?: PublicClient;
}): MppMethod {
  const now = deps.now ?? Date.now;
  const recipient = deps.recipient?.toLowerCase();
  const currency = deps.currency.toLowerCase();
  // built on the first verification (viem is loaded on first use: src/lib/viem.ts)
  const rpcUrl = deps.rpcUrl;
  let client: Promise<PublicClient> | undefined = deps.client ? Promise.resolve(deps.client) : undefined;
  const chainClient = (url: string) =>
    (client ??= viem().then(({ createPublicClient, http }) =>
      createPublicClient({ cacheTime: 0, transport: http(url, { timeout: 10_000, retryCount: 0 }) }),
    ));
  let chainId: Promise<number> | undefined;
  const chainIdOf = (c: PublicClient) =>
    (chainId ??= c.getChainId().catch((err: unknown) => {
      chainId = undefined;
      throw err;
    }));

  /**
   * Whether `address` signed `message`: a plain account is checked locally; otherwise (ERC-1271
   * smart wallet with code, or an ERC-6492 wrapped signature) on the chain. Throws when the chain
   * does not answer, so a valid smart-wallet proof is never called forged.
   */
  async function signedBy(c: PublicClient, address: Hex, message: string, signature: Hex): Promise<boolean> {
    const { isErc6492Signature, recoverMessageAddress } = await viem();
    try {
      if ((await recoverMessageAddress({ message, signature })).toLowerCase() === address.toLowerCase()) return true;
    } catch {
      // not a plain 65-byte signature: a smart wallet's, checked on the chain below
    }
    const code = await c.getCode({ address });
    if ((!code || code === '0x') && !isErc6492Signature(signature)) return false;
    return c.verifyMessage({ address, message, signature }).catch(() => false);
  }
  const mac = (payload: string) => createHmac('sha256', deps.secret).update(`mpp-challenge:${payload}`).digest('base64url');

  const issue = (t: Terms) => {
    const payload = Buffer.from(JSON.stringify(t)).toString('base64url');
    return `${payload}.${mac(payload)}`;
  };
  const open = (nonce: string): Terms | undefined => {
    const [payload, sig] = nonce.split('.');
    if (!payload || !sig || nonce.length > 512) return undefined;
    const expected = Buffer.from(mac(payload));
    const given = Buffer.from(sig);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return undefined;
    try {
      return JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Terms;
    } catch {
      return undefined;
    }
  };

  return {
    challenge(amountMicros, plugin) {
      if (!recipient) return null;
      const iat = now();
      const expiresAt = iat + deps.challengeTtlMs;
      const nonce = issue({
        a: amountMicros,
        c: currency,
        r: recipient,
        p: plugin,
        iat,
        exp: expiresAt,
        n: randomBytes(12).toString('base64url'),
      });
      // token amounts in base units: the stablecoins have 6 decimals, 1 unit = 1 micro-USD
      const amount = String(amountMicros);
      const description = `${plugin} plugin call ($${microsToUsd(amountMicros)})`;
      return {
        mpp: { scheme: 'Payment', amount, currency, recipient, description, nonce, expiresAt },
        wwwAuthenticate: `Payment amount="${amount}", currency="${currency}", recipient="${recipient}", nonce="${nonce}", expires="${new Date(expiresAt).toISOString()}", description="${description}"`,
      };
    },

    async verify(credential, amountMicros, plugin) {
      if (!recipient || !(deps.client || rpcUrl)) return { ok: false, reason: 'MPP is not configured' };
      let parsed: {
        challenge?: { nonce?: unknown };
        payload?: { type?: unknown; hash?: unknown; signature?: unknown };
        source?: unknown;
      };
      try {
        parsed = JSON.parse(Buffer.from(credential, 'base64url').toString('utf8'));
      } catch {
        return { ok: false, reason: 'malformed credential' };
      }
      const nonce = parsed?.challenge?.nonce;
      const hash = parsed?.payload?.hash;
      if (typeof nonce !== 'string' || typeof hash !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(hash))
        return { ok: false, reason: 'malformed credential' };
      const signature = parsed.payload?.signature;
      const source = typeof parsed.source === 'string' ? SOURCE.exec(parsed.source) : null;
      if (!source || typeof signature !== 'string' || !/^0x(?:[0-9a-fA-F]{2}){65,4096}$/.test(signature))
        return {
          ok: false,
          reason: "missing payer proof: sign the nonce and transaction with the transfer's sender (source, payload.signature)",
        };
      const terms = open(nonce);
      if (!terms) return { ok: false, reason: 'unknown challenge' };
      if (terms.exp <= now()) return { ok: false, reason: 'challenge expired' };
      if (terms.p !== plugin || terms.a < amountMicros || terms.r !== recipient || terms.c !== currency)
        return { ok: false, reason: 'challenge is for another call' };
      const txHash = hash.toLowerCase() as Hex;
      const payer = source[2]!.toLowerCase() as Hex;
      try {
        const client = await chainClient(rpcUrl ?? '');
        if (Number(source[1]) !== (await chainIdOf(client))) return { ok: false, reason: 'source is on another chain' };
        if (!(await signedBy(client, payer, mppProofMessage(nonce, txHash), signature as Hex)))
          return { ok: false, reason: 'payer signature does not match the source' };
        const { decodeEventLog } = await viem();
        const receipt = await client.getTransactionReceipt({ hash: txHash });
        if (receipt.status !== 'success') return { ok: false, reason: 'transaction failed' };
        const head = await client.getBlockNumber();
        if (head - receipt.blockNumber + 1n < BigInt(deps.confirmations)) return { ok: false, reason: 'transaction not confirmed yet' };
        const block = await client.getBlock({ blockNumber: receipt.blockNumber });
        // bound to the challenge: mined after it was issued, as far as the chain's clock can tell
        if (Number(block.timestamp) * 1000 < terms.iat - CHAIN_CLOCK_SKEW_MS)
          return { ok: false, reason: 'transaction predates the challenge' };
        // only what the signer itself sent counts
        let paid = 0n;
        let paidByOthers = 0n;
        for (const log of receipt.logs) {
          if (log.address.toLowerCase() !== currency) continue;
          try {
            const ev = decodeEventLog({ abi: [transferEvent], data: log.data, topics: log.topics });
            if (ev.args.to.toLowerCase() !== recipient) continue;
            if (ev.args.from.toLowerCase() === payer) paid += ev.args.value;
            else paidByOthers += ev.args.value;
          } catch {
            // not a Transfer event
          }
        }
        if (paid < BigInt(terms.a))
          return {
            ok: false,
            reason: paid + paidByOthers >= BigInt(terms.a) ? 'transfer is not from the source' : 'transfer below the amount',
          };
      } catch (err) {
        const msg = (err as Error).message ?? '';
        if (/could not be found|not found/i.test(msg)) return { ok: false, reason: 'transaction not found' };
        return { ok: false, reason: 'chain unavailable' };
      }
      // spent once: the nonce, the transaction and the credential are each UNIQUE
      const r = await sql<{ id: number }>`
        INSERT INTO mpp_payments (challenge_nonce, tx_hash, credential_hash, payer, amount_micros, plugin)
        VALUES (${nonce}, ${txHash}, ${sha256(credential)}, ${payer}, ${terms.a}, ${plugin})
        ON CONFLICT DO NOTHING RETURNING id`.execute(deps.db);
      if (!r.rows[0]) return { ok: false, reason: 'credential or transaction already used' };
      return { ok: true, txHash };
    },
  };
}
