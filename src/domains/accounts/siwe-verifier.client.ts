/**
 * Checks a SIWE (EIP-4361) sign-in: the message's own fields against our expectations, then the
 * signature. Plain accounts are checked locally by recovering the signer; anything else
 * (ERC-1271 deployed smart wallets, ERC-6492 wrapped signatures of undeployed ones) goes to the
 * chain through SIWE_RPC_URL. Returns a value, never throws for a bad signature (docs/architecture.md rule 3).
 */
import type { Hex, PublicClient } from 'viem';
import type { SiweMessage } from 'viem/siwe';
import { viem, viemSiwe } from '../../lib/viem.ts';

export type SiweCheck = { ok: true; address: `0x${string}`; nonce: string } | { ok: false; reason: string };

export interface SignatureVerifier {
  /** true when `signature` is `address`'s signature of `message` (EIP-191), by any account type. */
  verify(address: `0x${string}`, message: string, signature: Hex): Promise<boolean>;
}

export function createChainSignatureVerifier(options: { rpcUrl: string; chainId: number; timeoutMs?: number }): SignatureVerifier {
  // built on the first sign-in (viem is loaded on first use: src/lib/viem.ts)
  let chain: Promise<PublicClient> | undefined;
  const chainClient = () =>
    (chain ??= viem().then(({ createPublicClient, http }) =>
      createPublicClient({ transport: http(options.rpcUrl, { timeout: options.timeoutMs ?? 5000, retryCount: 0 }) }),
    ));
  return {
    async verify(address, message, signature) {
      const { isErc6492Signature, recoverMessageAddress } = await viem();
      const client = await chainClient();
      try {
        const recovered = await recoverMessageAddress({ message, signature });
        if (recovered.toLowerCase() === address.toLowerCase()) return true;
      } catch {
        // not a plain 65-byte signature: a smart-wallet signature, checked on chain below
      }
      // viem's verifyMessage answers false when the RPC fails, which would tell the owner of a
      // valid smart wallet that their signature is wrong. Ask for the account's code first: a
      // failure here is the chain being unreachable (503), and an address without code and
      // without an ERC-6492 wrapper is a plain account whose signature did not recover (false,
      // without a second round trip).
      let code: Hex | undefined;
      try {
        code = await client.getCode({ address });
      } catch {
        throw new SignatureServiceUnavailableError();
      }
      if ((!code || code === '0x') && !isErc6492Signature(signature)) return false;
      try {
        return await client.verifyMessage({ address, message, signature });
      } catch {
        return false;
      }
    },
  };
}

/** The verifying RPC did not answer (network error, timeout, HTTP error status). */
export class SignatureServiceUnavailableError extends Error {
  override name = 'SignatureServiceUnavailableError';
  constructor() {
    super('Signature verification service unavailable');
  }
}

export type SiweExpectations = { domain: string; origin: string; chainId: number; now: Date };

/** Parses and checks the message fields; the nonce is returned for the caller to consume. */
export async function checkSiweMessage(body: { address: string; message: string }, expect: SiweExpectations): Promise<SiweCheck> {
  const [{ parseSiweMessage }, { isAddress }] = await Promise.all([viemSiwe(), viem()]);
  let parsed: Partial<SiweMessage>;
  try {
    parsed = parseSiweMessage(body.message);
  } catch {
    return { ok: false, reason: 'Invalid SIWE message' };
  }
  if (!parsed.address || !parsed.nonce || !parsed.domain || !parsed.uri || !parsed.chainId || !parsed.version) {
    return { ok: false, reason: 'Invalid SIWE message' };
  }
  // EIP-4361: "Version: 1" is the only version; the URI's scheme is checked with its origin below
  if (parsed.version !== '1') return { ok: false, reason: 'Invalid SIWE message version' };
  if (!isAddress(body.address, { strict: false }) || parsed.address.toLowerCase() !== body.address.toLowerCase()) {
    return { ok: false, reason: 'Address does not match the message' };
  }
  if (parsed.domain !== expect.domain) return { ok: false, reason: 'Invalid domain' };
  let uriOrigin: string;
  try {
    uriOrigin = new URL(parsed.uri).origin;
  } catch {
    return { ok: false, reason: 'Invalid URI' };
  }
  if (uriOrigin !== expect.origin) return { ok: false, reason: 'Invalid URI' };
  if (parsed.chainId !== expect.chainId) return { ok: false, reason: 'Invalid chain id' };
  if (parsed.expirationTime && parsed.expirationTime.getTime() <= expect.now.getTime()) return { ok: false, reason: 'Message expired' };
  if (parsed.notBefore && parsed.notBefore.getTime() > expect.now.getTime()) return { ok: false, reason: 'Message not yet valid' };
  return { ok: true, address: parsed.address, nonce: parsed.nonce };
}
