/**
 * §6 "Watchdog notifications": a bot-messaging channel (Telegram Bot API `sendMessage`, enabled
 * when WATCHDOG_BOT_TOKEN and WATCHDOG_ADMIN_CHAT_ID are set) and a webhook channel (a JSON POST
 * to WATCHDOG_WEBHOOK_URL). Both are plain HTTP behind one interface (docs/architecture.md rule 4); tests point
 * the URLs at fakes that speak the same protocol (test/fakes/telegram.ts, test/fakes/webhook.ts).
 * The bot token is part of the Bot API path, so URLs are never logged.
 */

export type NotificationChannelName = 'telegram' | 'webhook';

/** What one notification says (the stored outbox payload). */
export type WatchdogNotice = {
  eventId: number;
  /** degraded | repair_attempt | crash_loop */
  event: string;
  agentId: string;
  state: string | null;
  previousState: string | null;
  attempt: number | null;
  maxAttempts: number | null;
  ok: boolean | null;
  detail: string | null;
  at: string;
};

export interface NotificationChannel {
  readonly name: NotificationChannelName;
  /** Resolves when the receiver accepted it; throws with a short reason otherwise. */
  send(notice: WatchdogNotice): Promise<void>;
}

/** The human-readable line the bot sends. */
export function noticeText(n: WatchdogNotice): string {
  const head =
    n.event === 'degraded'
      ? `⚠️ Agent ${n.agentId} is degraded`
      : n.event === 'crash_loop'
        ? `🛑 Agent ${n.agentId} is in a crash loop; automatic repairs stopped`
        : `🔧 Agent ${n.agentId}: repair attempt ${n.attempt ?? '?'}${n.maxAttempts ? `/${n.maxAttempts}` : ''} ${n.ok ? 'succeeded' : 'failed'}`;
  return n.detail ? `${head}\n${n.detail}` : head;
}

async function postJson(url: string, body: unknown, timeoutMs: number): Promise<Response> {
  try {
    return await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err) {
    throw new Error((err as Error).name === 'TimeoutError' ? 'timed out' : 'unreachable');
  }
}

/** Telegram Bot API: POST {api}/bot<token>/sendMessage `{chat_id, text}` → `{ok:true,result}`. */
export function createTelegramChannel(options: { apiUrl: string; token: string; chatId: string; timeoutMs?: number }): NotificationChannel {
  const endpoint = `${options.apiUrl.replace(/\/+$/, '')}/bot${options.token}/sendMessage`;
  return {
    name: 'telegram',
    async send(notice) {
      const res = await postJson(
        endpoint,
        { chat_id: options.chatId, text: noticeText(notice), disable_web_page_preview: true },
        options.timeoutMs ?? 10_000,
      );
      const body = (await res.json().catch(() => undefined)) as { ok?: boolean; description?: string } | undefined;
      if (!res.ok || body?.ok !== true)
        throw new Error(`bot API answered ${res.status}${body?.description ? `: ${body.description.slice(0, 200)}` : ''}`);
    },
  };
}

/** Webhook: POST the notice as JSON; any 2xx is accepted. */
export function createWebhookChannel(options: { url: string; timeoutMs?: number }): NotificationChannel {
  return {
    name: 'webhook',
    async send(notice) {
      const res = await postJson(options.url, { type: 'watchdog', ...notice }, options.timeoutMs ?? 10_000);
      await res.body?.cancel();
      if (res.status < 200 || res.status >= 300) throw new Error(`webhook answered ${res.status}`);
    },
  };
}

/** The channels the configuration enables (§6: bot when token and chat id are set; webhook when its URL is). */
export function channelsFromConfig(config: {
  WATCHDOG_BOT_TOKEN?: string | undefined;
  WATCHDOG_ADMIN_CHAT_ID?: string | undefined;
  WATCHDOG_BOT_API_URL: string;
  WATCHDOG_WEBHOOK_URL?: string | undefined;
}): NotificationChannel[] {
  const out: NotificationChannel[] = [];
  if (config.WATCHDOG_BOT_TOKEN && config.WATCHDOG_ADMIN_CHAT_ID) {
    out.push(
      createTelegramChannel({
        apiUrl: config.WATCHDOG_BOT_API_URL,
        token: config.WATCHDOG_BOT_TOKEN,
        chatId: config.WATCHDOG_ADMIN_CHAT_ID,
      }),
    );
  }
  if (config.WATCHDOG_WEBHOOK_URL) out.push(createWebhookChannel({ url: config.WATCHDOG_WEBHOOK_URL }));
  return out;
}
