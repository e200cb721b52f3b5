/**
 * sha256 takes crypto.hash's digest as latin1 text and copies it into a Buffer (faster than
 * asking for a Buffer: src/lib/crypto.ts). Every stored token and key hash depends on these bytes
 * being exactly the SHA-256 digest, so they are checked against createHash on inputs that cover
 * every byte value of the digest and non-ASCII input.
 */
import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { randomToken, sha256, sha256Base64url, sha256Hex } from '../../src/lib/crypto.ts';

const reference = (s: string) => createHash('sha256').update(s).digest();

describe('sha256 helpers', () => {
  it('give the SHA-256 digest of the UTF-8 input, as bytes, hex and base64url', () => {
    const inputs = ['', 'a', 'sk_live_example', 'ü€𝄞 non-ASCII', 'x'.repeat(10_000)];
    for (let i = 0; i < 2000; i++) inputs.push(randomToken(32), randomBytes(20).toString('latin1'));
    const seen = new Set<number>();
    for (const s of inputs) {
      const want = reference(s);
      const got = sha256(s);
      expect(got.length).toBe(32);
      expect(got.equals(want)).toBe(true);
      expect(sha256Hex(s)).toBe(want.toString('hex'));
      expect(sha256Base64url(s)).toBe(want.toString('base64url'));
      expect(Buffer.from(sha256Base64url(s), 'base64url').equals(want)).toBe(true);
      for (const b of got) seen.add(b);
    }
    // the latin1 round trip must carry bytes 0x80-0xff as well as ASCII
    expect(seen.size).toBe(256);
  });

  it('return independent Buffers (a pooled Buffer must not be overwritten by the next hash)', () => {
    const a = sha256('first');
    const copy = Buffer.from(a);
    sha256('second');
    expect(a.equals(copy)).toBe(true);
  });
});
