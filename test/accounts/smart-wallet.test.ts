/**
 * §4.1 wallet sign-in with smart-wallet signatures: ERC-1271 (deployed contract wallet) and
 * ERC-6492 (signature of a not-yet-deployed wallet, wrapped with its factory call), verified
 * through SIWE_RPC_URL against a local anvil chain.
 *
 * The "wallet" is a tiny contract written in raw EVM bytecode: isValidSignature(hash, sig) returns
 * the ERC-1271 magic value 0x1626ba7e iff the first 32 bytes of `sig` equal `hash`. That is no
 * real security, but it is enough to prove the server asks the chain with the right EIP-191 hash of
 * the SIWE message, and that a signature for another message is refused.
 */
import { getAddress, getContractAddress, type Hex, hashMessage, pad, serializeErc6492Signature } from 'viem';
import { createSiweMessage } from 'viem/siwe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Anvil, anvilAvailable, startAnvil } from '../helpers/anvil.ts';
import { startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

// runtime: if calldata[4:36] (hash) == calldata[0x64:0x84] (first word of sig) return magic, else 0
//   PUSH1 4 CALLDATALOAD PUSH1 0x64 CALLDATALOAD EQ PUSH1 0x0f JUMPI
//   PUSH1 0x20 PUSH1 0 RETURN
//   JUMPDEST PUSH4 0x1626ba7e PUSH1 0xe0 SHL PUSH1 0 MSTORE PUSH1 0x20 PUSH1 0 RETURN
const WALLET_RUNTIME = ('0x' +
  '600435' +
  '606435' +
  '14' +
  '600f57' +
  '60206000f3' +
  '5b' +
  '631626ba7e' +
  '60e01b' +
  '600052' +
  '60206000f3') as Hex;
// init code returning the runtime: PUSH1 len DUP1 PUSH1 0x0b PUSH1 0 CODECOPY PUSH1 0 RETURN
const runtimeLen = (WALLET_RUNTIME.length - 2) / 2;
const WALLET_INIT = `0x60${runtimeLen.toString(16).padStart(2, '0')}80600b6000396000f3${WALLET_RUNTIME.slice(2)}` as Hex;
// factory runtime: CREATE2(value 0, calldata as init code, salt 0), then stop
//   CALLDATASIZE PUSH1 0 PUSH1 0 CALLDATACOPY PUSH1 0 CALLDATASIZE PUSH1 0 PUSH1 0 CREATE2 POP STOP
const FACTORY_RUNTIME = '0x' + '36600060003760003660006000f55000';
const FACTORY = '0x00000000000000000000000000000000000fac70' as const;

let anvil: Anvil | undefined;
let rpcUrl = '';
let t: TestPlatform;

const rpc = (method: string, params: unknown[]) => anvil!.rpc(method, params);

beforeAll(async () => {
  if (!anvilAvailable) return;
  anvil = await startAnvil();
  rpcUrl = anvil.rpcUrl;
  await rpc('anvil_setCode', [FACTORY, FACTORY_RUNTIME]);
  t = await startTestPlatform({ SIWE_RPC_URL: rpcUrl });
});

afterAll(async () => {
  await t?.close();
  await anvil?.stop();
});

const nonce = async () => (await t.web.inject({ method: 'GET', url: '/api/auth/nonce' })).json().nonce as string;
const messageFor = async (address: `0x${string}`) =>
  createSiweMessage({
    address,
    chainId: 8453,
    domain: 'localhost:3000',
    uri: 'http://localhost:3000',
    version: '1',
    nonce: await nonce(),
    issuedAt: new Date(),
  });
const walletAuth = (payload: object) => t.web.inject({ method: 'POST', url: '/api/wallet-auth', payload });

describe.skipIf(!anvilAvailable)('§4.1 wallet-auth with smart-wallet signatures through SIWE_RPC_URL (anvil)', () => {
  it('ERC-1271: a deployed contract wallet that approves the message hash signs in; the user is created', async () => {
    const wallet = '0x0000000000000000000000000000000000c0ffee' as const;
    await rpc('anvil_setCode', [wallet, WALLET_RUNTIME]);
    const message = await messageFor(wallet);
    // 96 bytes, so it can never be taken for a plain 65-byte ECDSA signature
    const signature = pad(hashMessage(message), { size: 96, dir: 'right' });
    const res = await walletAuth({ address: wallet, message, signature });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true, user: { id: expect.any(String), name: `Wallet 0x0000...${getAddress(wallet).slice(-4)}` } });
    const rows = await t.database.db.kysely.selectFrom('users').select('email').where('wallet_address', '=', wallet).execute();
    expect(rows).toEqual([{ email: `${wallet}@wallet.local` }]);
  });

  it('ERC-1271: the contract refuses a signature made for another message → 401', async () => {
    const wallet = '0x0000000000000000000000000000000000c0ffe2' as const;
    await rpc('anvil_setCode', [wallet, WALLET_RUNTIME]);
    const message = await messageFor(wallet);
    const other = await messageFor(wallet);
    const res = await walletAuth({ address: wallet, message, signature: pad(hashMessage(other), { size: 96, dir: 'right' }) });
    expect(res.statusCode).toBe(401);
  });

  it('ERC-6492: an undeployed wallet (factory + calldata wrapped around the signature) signs in', async () => {
    const wallet = getContractAddress({ opcode: 'CREATE2', from: FACTORY, salt: pad('0x00', { size: 32 }), bytecode: WALLET_INIT });
    expect(await rpc('eth_getCode', [wallet, 'latest'])).toBe('0x');
    const message = await messageFor(wallet);
    const signature = serializeErc6492Signature({
      address: FACTORY,
      data: WALLET_INIT,
      signature: pad(hashMessage(message), { size: 96, dir: 'right' }),
    });
    const res = await walletAuth({ address: wallet, message, signature });
    expect(res.statusCode).toBe(200);
    expect(res.json().user.name).toBe(`Wallet ${wallet.slice(0, 6)}...${wallet.slice(-4)}`);
    // verification was a simulated call: nothing was deployed
    expect(await rpc('eth_getCode', [wallet, 'latest'])).toBe('0x');
  });

  it('ERC-6492: a wrapped signature for another message → 401', async () => {
    const wallet = getContractAddress({ opcode: 'CREATE2', from: FACTORY, salt: pad('0x00', { size: 32 }), bytecode: WALLET_INIT });
    const message = await messageFor(wallet);
    const signature = serializeErc6492Signature({
      address: FACTORY,
      data: WALLET_INIT,
      signature: pad(hashMessage('something else'), { size: 96, dir: 'right' }),
    });
    expect((await walletAuth({ address: wallet, message, signature })).statusCode).toBe(401);
  });

  it('an address with no code and a non-ECDSA signature → 401', async () => {
    const wallet = '0x0000000000000000000000000000000000badbad' as const;
    const message = await messageFor(wallet);
    expect(
      (await walletAuth({ address: wallet, message, signature: pad(hashMessage(message), { size: 96, dir: 'right' }) })).statusCode,
    ).toBe(401);
  });
});

describe('§4.1 wallet-auth when SIWE_RPC_URL is unreachable', () => {
  // 503, not 401: "Invalid signature" would tell the owner of a valid smart wallet that their
  // signature is wrong when the platform simply could not ask the chain (EIP-1271 needs the RPC)
  it('a smart-wallet signature answers 503 "try again" at once (a closed port), never 401 or 500', async () => {
    await withTestPlatform({ SIWE_RPC_URL: 'http://127.0.0.1:9' }, async (t2) => {
      const wallet = '0x0000000000000000000000000000000000c0ffee' as const;
      const n0 = (await t2.web.inject({ method: 'GET', url: '/api/auth/nonce' })).json().nonce;
      const message = createSiweMessage({
        address: wallet,
        chainId: 8453,
        domain: 'localhost:3000',
        uri: 'http://localhost:3000',
        version: '1',
        nonce: n0,
      });
      const res = await t2.web.inject({
        method: 'POST',
        url: '/api/wallet-auth',
        payload: { address: wallet, message, signature: pad(hashMessage(message), { size: 96, dir: 'right' }) },
      });
      expect(res.statusCode).toBe(503);
      expect(res.json().error).toMatch(/try again/);
    });
  });
});
