/**
 * Discord channels owned by the platform (docs/channels.md): the same channel service as
 * Telegram's, over the real @discordjs clients against a local server speaking Discord's REST API
 * and gateway (test/fakes/discord-api.ts), the real platform on PostgreSQL, the agent's gateway the
 * OpenAI-compatible fake (its recorded requests are what the model was asked).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { eventually } from '../agents/helpers.ts';
import { type FakeDiscord, startFakeDiscord } from '../fakes/discord-api.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { signUp, startTestPlatform, type TestPlatform } from '../helpers/platform.ts';
import { chatRequests, GATEWAY_TOKEN, type Owner, ownerWithAgent } from '../sessions/helpers.ts';

const TOKEN = `MTA${'x'.repeat(20)}.discord-bot-token.${process.pid}`;
let t: TestPlatform;
let agent: FakeOpenAi;
let discord: FakeDiscord;

const put = (o: Owner, payload: Record<string, unknown>) =>
  t.web.inject({ method: 'PUT', url: `/api/agents/${o.agentId}/channels/discord`, headers: { cookie: o.cookie }, payload });
const list = async (o: Owner) =>
  (await t.web.inject({ method: 'GET', url: `/api/agents/${o.agentId}/channels`, headers: { cookie: o.cookie } })).json();
const said = (channelId: string) => discord.sent.filter((m) => m.channelId === channelId).map((m) => m.content);
const author = (id: string, username: string) => ({ id, username });

beforeAll(async () => {
  agent = await startFakeOpenAi({ apiKey: GATEWAY_TOKEN });
  discord = await startFakeDiscord({ token: TOKEN, heartbeatInterval: 5_000 });
  t = await startTestPlatform({
    REGISTER_RATE_LIMIT: '100000',
    DISCORD_API_URL: discord.apiUrl,
    DISCORD_GATEWAY_URL: discord.gatewayUrl,
  });
  await t.platform.startChannels({ servesWeb: false });
});
afterAll(async () => {
  await t?.close();
  await discord?.close();
  await agent?.close();
});
beforeEach(() => agent.reset());

describe('Discord channels', () => {
  it('a refused token is 400 CHANNEL_TOKEN_REFUSED without the token; a good one connects and is listed without it', async () => {
    const o = await ownerWithAgent(t, agent);
    const refused = await put(o, { botToken: 'not-the-bot-token-at-all' });
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({ code: 'CHANNEL_TOKEN_REFUSED' });
    expect(refused.body).not.toContain('not-the-bot-token');

    const res = await put(o, { botToken: TOKEN, allowFrom: ['@ada'] });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.body).not.toContain(TOKEN);
    expect(res.json()).toMatchObject({ kind: 'discord', bot: { id: discord.bot.id, username: discord.bot.username }, allowFrom: ['@ada'] });
    const listed = await eventually(async () => {
      const l = await list(o);
      return l.channels[0]?.status === 'connected' ? l : null;
    });
    expect(JSON.stringify(listed)).not.toContain(TOKEN);
    const other = await signUp(t.web);
    const theirs = await t.web.inject({ method: 'GET', url: `/api/agents/${o.agentId}/channels`, headers: { cookie: other.cookie } });
    expect(theirs.statusCode).toBe(404);

    // allowFrom holds before the model is called: @bob is not on the list
    discord.deliver({ channelId: '900', guildId: '1', author: author('501', 'bob'), content: 'hello?' });
    // @ada is, and is answered in her channel, with the typing indicator, in a session of her own
    discord.deliver({ channelId: '901', author: author('502', 'ada'), content: 'hello agent' });
    await eventually(async () => said('901').length > 0);
    expect(said('901')).toEqual(['Echo: hello agent']);
    expect(discord.typing).toContain('901');
    expect(chatRequests(agent)).toEqual([['user: hello agent']]);
    expect(said('900').filter((m) => m.includes('Echo'))).toEqual([]);

    const del = await t.web.inject({ method: 'DELETE', url: `/api/agents/${o.agentId}/channels/discord`, headers: { cookie: o.cookie } });
    expect(del.statusCode).toBeLessThan(300);
    await eventually(async () => discord.openSockets === 0);
  });

  it('a gateway that gives up after connecting (Discord closes with 4004: the token was reset) reads error with the reason', async () => {
    const o = await ownerWithAgent(t, agent);
    expect((await put(o, { botToken: TOKEN })).statusCode).toBe(200);
    await eventually(async () => (await list(o)).channels[0]?.status === 'connected');
    discord.drop(4004);
    const failed = await eventually(async () => {
      const c = (await list(o)).channels[0];
      return c?.status === 'error' ? c : null;
    });
    expect(JSON.stringify(failed)).toMatch(/refused|Authentication failed/i);
    expect(JSON.stringify(failed)).not.toContain(TOKEN);
  });
});
