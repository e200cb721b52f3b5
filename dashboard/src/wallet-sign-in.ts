/**
 * Wallet sign-in (§4.1, SIWE / EIP-4361) with the browser's wallet (an EIP-1193 provider at
 * `window.ethereum`). The server names the domain, URI and chain the message must carry
 * (GET /api/auth/siwe) and a single-use nonce; the wallet signs with `personal_sign`; the server
 * verifies (smart wallets included) and sets the session cookie. The button shows only when the
 * browser has a wallet.
 */
import { api, call } from './api/client.ts';

type Eip1193 = { request(args: { method: string; params?: unknown[] }): Promise<unknown> };

export const browserWallet = (): Eip1193 | undefined => (window as unknown as { ethereum?: Eip1193 }).ethereum;

const toHex = (text: string) => `0x${Array.from(new TextEncoder().encode(text), (b) => b.toString(16).padStart(2, '0')).join('')}`;

export function siweMessage(p: {
  domain: string;
  uri: string;
  chainId: number;
  version: string;
  address: string;
  nonce: string;
  issuedAt: string;
}) {
  return [
    `${p.domain} wants you to sign in with your Ethereum account:`,
    p.address,
    '',
    'Sign in to the agent platform.',
    '',
    `URI: ${p.uri}`,
    `Version: ${p.version}`,
    `Chain ID: ${p.chainId}`,
    `Nonce: ${p.nonce}`,
    `Issued At: ${p.issuedAt}`,
  ].join('\n');
}

export async function signInWithWallet(wallet: Eip1193): Promise<void> {
  let address: string;
  try {
    const accounts = (await wallet.request({ method: 'eth_requestAccounts' })) as string[];
    if (!accounts[0]) throw new Error('no account');
    address = accounts[0];
  } catch {
    throw new Error('The wallet did not share an account. Unlock it and try again.');
  }
  const [params, { nonce }] = await Promise.all([call(api.GET('/api/auth/siwe')), call(api.GET('/api/auth/nonce'))]);
  const message = siweMessage({ ...params, address, nonce, issuedAt: new Date().toISOString() });
  let signature: string;
  try {
    signature = (await wallet.request({ method: 'personal_sign', params: [toHex(message), address] })) as string;
  } catch {
    throw new Error('The signature was declined in the wallet.');
  }
  await call(api.POST('/api/wallet-auth', { body: { address, message, signature } }));
}
