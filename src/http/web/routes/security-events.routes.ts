/**
 * §4.1 "Security event receivers" (§6 "Security events"): the identity provider pushes signed
 * security event tokens here. The body is the raw token (RISC transmitters send
 * `application/secevent+jwt`; any content type is read as text, in this module's plugin only).
 * Public routes: the token's signature is the credential (risc-verifier.client.ts).
 */
import { z } from 'zod';
import { EVENTS_SUPPORTED, type SecurityEventsService } from '../../../domains/security-events/index.ts';
import type { App } from '../../shared/base-app.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses } from '../../shared/schemas.ts';

const RISC_PATH = '/api/security/risc' as const;

const tokenOf = (body: unknown) => (typeof body === 'string' ? body.trim() : '');

export const securityEventsRoutes = ({ events }: { events: SecurityEventsService }): RouteModule<'public'> => ({
  prefix: '/api',
  public: async (scope: App) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => done(null, body));

    scope.post('/security/risc', {
      schema: {
        tags: ['security events'],
        summary: 'Receive a security event token from the identity provider (RISC)',
        description:
          'The body is the raw signed security event token (a JWT; content type `application/secevent+jwt` or any other, read as ' +
          'text). Checked in the order of §6: `iss` must be IDP_ISSUER; `aud` must be one of the IDP_CLIENT_ID ids; the key is ' +
          'chosen by `kid` from the JWKS named by the RISC configuration document (IDP_RISC_CONFIG_URL, default ' +
          'IDP_ISSUER + `/.well-known/risc-configuration`, both kept 24 hours; an unknown `kid` fetches the key set again); ' +
          'only RS256 is accepted (`alg: none`, HS256 refused); an `exp` in the past is refused. The payload needs `jti` and ' +
          '`events` (event type URI → `{subject:{sub|email}, reason}`). Success: **202 with an empty body**; the event is recorded ' +
          'under its `jti` before the answer and acted on by a background job (sessions revoked, identity-provider sign-in ' +
          'disabled or enabled, stored refresh tokens dropped, as §6 lists). A `jti` already received is acknowledged (202) and ' +
          "not acted on again. 400 `{error}` for an empty body or any invalid token; 503 when the provider's keys cannot be fetched.",
        response: { 202: z.null().describe('Empty body: the event is recorded and will be acted on'), ...errorResponses(400, 503) },
      },
      handler: async (request, reply) => {
        await events.receive(tokenOf(request.body));
        // no payload at all (§4.1 "empty body"): fastify serializes nothing, not even `null`
        return reply.code(202).send(undefined as never);
      },
    });

    scope.get('/security/risc', {
      schema: {
        tags: ['security events'],
        summary: 'Describe the security event receiver',
        description:
          'What the receiver accepts (§4.1): `{status:"ok", endpoint:"/api/security/risc", description, events_supported}`. ' +
          'The operator registers PUBLIC_URL + `/api/security/risc` with the identity provider (docs/security.md "Security events").',
        response: {
          200: z.object({
            status: z.literal('ok'),
            endpoint: z.literal(RISC_PATH),
            description: z.string(),
            events_supported: z.array(z.enum(EVENTS_SUPPORTED)),
          }),
        },
      },
      handler: async () => ({
        status: 'ok' as const,
        endpoint: RISC_PATH,
        description:
          'Security event receiver (RISC, OpenID Shared Signals): POST a signed security event token from the identity provider; ' +
          'answered 202 with an empty body.',
        events_supported: [...EVENTS_SUPPORTED],
      }),
    });

    scope.post('/auth/idp/risc', {
      schema: {
        tags: ['security events'],
        summary: 'Receive a security event token (legacy receiver)',
        description:
          'Legacy receiver (§4.1, §6). The body is the raw token; 400 `{error}` when it is not three dot-separated parts. The token ' +
          "must also pass the primary receiver's issuer and RS256 signature checks (an `aud`, when present, must be a configured " +
          "client id), so an unsigned token cannot end anyone's sessions (400 otherwise). Payload: `iss`, `sub` (the user's " +
          'email), `events`. account-compromised, account-disabled, sessions-revoked and identifier-changed revoke every session ' +
          'of the user with that email; account-enabled does nothing. Answers `{ok:true}` (acknowledged; acted on by a background ' +
          'job, a repeated `jti` or identical token only once).',
        response: { 200: z.object({ ok: z.literal(true) }), ...errorResponses(400, 503) },
      },
      handler: async (request) => {
        await events.receiveLegacy(tokenOf(request.body));
        return { ok: true as const };
      },
    });
  },
});
