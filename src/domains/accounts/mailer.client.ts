/**
 * Email out of the platform (password reset links, docs/security.md "Password reset"), behind one
 * interface so the domain never imports an SDK (docs/architecture.md rule 4). The real
 * implementation speaks SMTP through nodemailer to SMTP_URL (`smtp://user:pass@host:587`, STARTTLS
 * when the server offers it, or `smtps://…:465`, TLS from the start); the tests run a real local
 * SMTP server (test/fakes/smtp.ts) and read what it received.
 */
import { createRequire } from 'node:module';
import type * as Nodemailer from 'nodemailer';

export type MailMessage = { to: string; subject: string; text: string };

export interface Mailer {
  send(message: MailMessage): Promise<void>;
  close(): Promise<void>;
}

/** How long one step of an SMTP conversation may take: a stuck mail server must not hold work forever. */
const SMTP_TIMEOUT_MS = 15_000;

export function createSmtpMailer(options: { url: string; from: string }): Mailer {
  // required when SMTP_URL is set, not at start (~20 MB resident otherwise held for nothing)
  const { createTransport } = createRequire(import.meta.url)('nodemailer') as typeof Nodemailer;
  const transport = createTransport({
    url: options.url,
    connectionTimeout: SMTP_TIMEOUT_MS,
    greetingTimeout: SMTP_TIMEOUT_MS,
    socketTimeout: SMTP_TIMEOUT_MS,
    // nodemailer's own logger would print the message, the reset link in it included: never on
    logger: false,
    debug: false,
  });
  return {
    async send(message) {
      await transport.sendMail({ from: options.from, to: message.to, subject: message.subject, text: message.text });
    },
    async close() {
      transport.close();
    },
  };
}

/** MAIL_FROM's default: a no-reply address at PUBLIC_URL's host name. */
export function defaultMailFrom(publicUrl: string): string {
  return `Agent platform <no-reply@${new URL(publicUrl).hostname}>`;
}
