/**
 * EIP-712 typed data of payment sessions (docs/payments.md "Receipts"):
 * - `Receipt`: what the platform signs for every session debit, with its own key, so a client can
 *   check a receipt offline (recover the signer and compare with GET /api/payments/receipt-signer);
 * - `OpenSession`: what a wallet signs to open a session funded from its balance without a
 *   signed-in account.
 * Both live in one domain whose `verifyingContract` is the deployment's receipt-signer address, so
 * a signature made for one deployment means nothing to another (they have other receipt keys).
 */
import { createHmac } from 'node:crypto';
import type { Hex, PrivateKeyAccount } from 'viem';
import { sha256Hex } from '../../../lib/crypto.ts';
import { viem, viemAccounts } from '../../../lib/viem.ts';

export const PAYMENT_DOMAIN_NAME = 'agent-platform payments';

export const receiptTypes = {
  Receipt: [
    { name: 'session', type: 'bytes32' },
    { name: 'nonce', type: 'bytes16' },
    { name: 'amount', type: 'uint256' },
    { name: 'plugin', type: 'string' },
  ],
} as const;

/**
 * `sessionKeyHash` is the SHA-256 of the session id the signer chose (`ps_` + 43 base64url
 * characters, kept secret): the session opened is reachable only with that id, so whoever submits
 * the signature gets no bearer of their own.
 */
export const openSessionTypes = {
  OpenSession: [
    { name: 'wallet', type: 'address' },
    { name: 'deposit', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
    { name: 'salt', type: 'bytes32' },
    { name: 'sessionKeyHash', type: 'bytes32' },
  ],
} as const;

/** The payment domain of the deployment whose receipt signer is `verifyingContract`. */
export const paymentDomain = (chainId: number, verifyingContract: Hex) =>
  ({ name: PAYMENT_DOMAIN_NAME, version: '2', chainId, verifyingContract }) as const;
export type PaymentDomain = ReturnType<typeof paymentDomain>;

/** OpenSession's `sessionKeyHash` of a session id the signer chose: SHA-256 of its UTF-8 bytes, as the platform stores ids. */
export const sessionKeyHash = (sessionId: string): Hex => `0x${sha256Hex(sessionId)}`;

/** keccak256 of the session id's UTF-8 bytes: the receipt names the session without carrying its secret. */
export const sessionRef = async (sessionId: string): Promise<Hex> => {
  const { keccak256, toHex } = await viem();
  return keccak256(toHex(sessionId));
};

/**
 * The receipt key when PAYMENT_RECEIPT_KEY is unset: derived from SECRETS_ENCRYPTION_KEY, which
 * every process sharing the database already has, so all replicas sign with one key and nothing
 * new is stored. (An HMAC output is a valid secp256k1 key except with probability ~2^-128.)
 */
export const deriveReceiptKey = (secretsKey: Buffer): Hex =>
  `0x${createHmac('sha256', secretsKey).update('agent-platform payment receipt key v1').digest('hex')}`;

export function createReceiptSigner(privateKey: Hex, chainId: number) {
  // the account is made on first use (viem is loaded on first use: src/lib/viem.ts)
  let account: Promise<PrivateKeyAccount> | undefined;
  const signer = () => (account ??= viemAccounts().then(({ privateKeyToAccount }) => privateKeyToAccount(privateKey)));
  const domain = async () => paymentDomain(chainId, (await signer()).address);
  return {
    address: async () => (await signer()).address,
    /** This deployment's payment domain (the signer's address is its verifyingContract). */
    domain,
    /** Signs one debit's receipt; `nonce` is 16 bytes as 32 lower-case hex digits without 0x. */
    async sign(r: { sessionId: string; nonce: string; amountMicros: number; plugin: string }): Promise<Hex> {
      return (await signer()).signTypedData({
        domain: await domain(),
        types: receiptTypes,
        primaryType: 'Receipt',
        message: { session: await sessionRef(r.sessionId), nonce: `0x${r.nonce}`, amount: BigInt(r.amountMicros), plugin: r.plugin },
      });
    },
  };
}
export type ReceiptSigner = ReturnType<typeof createReceiptSigner>;

/** The address that signed an OpenSession authorisation (EOA signatures), or undefined when malformed. */
export async function recoverOpenSessionSigner(
  domain: PaymentDomain,
  m: { wallet: Hex; depositMicros: number; deadline: number; salt: Hex; sessionKeyHash: Hex },
  signature: Hex,
): Promise<string | undefined> {
  try {
    const { recoverTypedDataAddress } = await viem();
    const a = await recoverTypedDataAddress({
      domain,
      types: openSessionTypes,
      primaryType: 'OpenSession',
      message: {
        wallet: m.wallet,
        deposit: BigInt(m.depositMicros),
        deadline: BigInt(m.deadline),
        salt: m.salt,
        sessionKeyHash: m.sessionKeyHash,
      },
      signature,
    });
    return a.toLowerCase();
  } catch {
    return undefined;
  }
}
