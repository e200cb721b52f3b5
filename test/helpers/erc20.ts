/**
 * A minimal ERC-20 in raw EVM bytecode for anvil tests (no compiler on the machine):
 * `balanceOf(address)` and `transfer(address,uint256)` with a balance check and the standard
 * `Transfer(address,address,uint256)` event. A holder's balance lives at the storage slot equal
 * to its address, so tests mint with `anvil_setStorageAt`.
 */
import { type Hex, keccak256, pad, toHex } from 'viem';

type Op = string | { label: string } | { push2: string };

const TRANSFER_TOPIC = keccak256(toHex('Transfer(address,address,uint256)')).slice(2);

const program: Op[] = [
  '6000',
  '35',
  '60e0',
  '1c', // selector = calldata[0:4]
  '80',
  '6370a08231',
  '14',
  { push2: 'balanceOf' },
  '57',
  '80',
  '63a9059cbb',
  '14',
  { push2: 'transfer' },
  '57',
  '6000',
  '80',
  'fd',
  { label: 'balanceOf' },
  '5b',
  '6004',
  '35',
  '54',
  '6000',
  '52',
  '6020',
  '6000',
  'f3',
  { label: 'transfer' },
  '5b',
  '33',
  '54',
  '6024',
  '35', // [amt, bal]
  '80',
  '82',
  '10',
  { push2: 'fail' },
  '57', // bal < amt → fail
  '81',
  '81',
  '90',
  '03',
  '33',
  '55', // balance[caller] = bal - amt
  '80',
  '6004',
  '35',
  '54',
  '01',
  '6004',
  '35',
  '55', // balance[to] += amt
  '6000',
  '52', // mem[0] = amt
  '6004',
  '35',
  '33',
  `7f${TRANSFER_TOPIC}`,
  '6020',
  '6000',
  'a3', // LOG3(0, 32, Transfer, from, to)
  '6001',
  '6000',
  '52',
  '6020',
  '6000',
  'f3', // return true
  { label: 'fail' },
  '5b',
  '6000',
  '80',
  'fd',
];

function assemble(ops: Op[]): Hex {
  const labels = new Map<string, number>();
  let pc = 0;
  for (const op of ops) {
    if (typeof op === 'string') pc += op.length / 2;
    else if ('label' in op) labels.set(op.label, pc);
    else pc += 3;
  }
  let out = '';
  for (const op of ops) {
    if (typeof op === 'string') out += op;
    else if ('push2' in op) out += `61${labels.get(op.push2)!.toString(16).padStart(4, '0')}`;
  }
  return `0x${out}`;
}

export const ERC20_RUNTIME = assemble(program);

/** storage slot of `holder`'s balance */
export const balanceSlot = (holder: Hex): Hex => pad(holder.toLowerCase() as Hex, { size: 32 });
