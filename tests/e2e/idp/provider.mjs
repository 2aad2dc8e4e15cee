// A real OpenID Connect provider on loopback for tests/e2e/test_idp_tokens.py: panva's certified
// oidc-provider (npm), installed by the test into .oidc-provider/ (OIDC_PROVIDER_MODULE: its
// lib/index.js). It issues RFC 9068 JWT access tokens for any resource indicator (RFC 8707),
// signed with the private key the test hands over (IDP_JWKS), so the test can also sign tokens
// that only the checks refuse. The sign-in is headless: /interaction/<uid>?account=<user>
// finishes the login and the consent in one step, for the account the test's browser names.
// A confidential client (machine / machine-secret) may use client_credentials.
//
//   IDP_PORT=9000 IDP_JWKS='{"keys":[...]}' OIDC_PROVIDER_MODULE=... node provider.mjs
import { pathToFileURL } from 'node:url';

const { default: Provider } = await import(pathToFileURL(process.env.OIDC_PROVIDER_MODULE).href);

const port = Number(process.env.IDP_PORT);
const issuer = `http://127.0.0.1:${port}`;
const SCOPES = 'library:read library:write';

const provider = new Provider(issuer, {
  jwks: JSON.parse(process.env.IDP_JWKS),
  clients: [
    {
      client_id: 'machine',
      client_secret: 'machine-secret',
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
    },
  ],
  // What the MCP SDK registers (RFC 7591) is a public native client: PKCE, no secret,
  // http redirects to loopback.
  clientDefaults: {
    application_type: 'native',
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  },
  scopes: ['openid', 'offline_access', 'library:read', 'library:write'],
  findAccount: async (ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => ({
        scope: SCOPES,
        audience: resource,
        accessTokenTTL: 600,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  cookies: { keys: ['e2e-only-cookie-key'] },
});

provider.use(async (ctx, next) => {
  if (!ctx.path.startsWith('/interaction/')) {
    await next();
    return;
  }
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  const { prompt, params, session } = details;
  let result;
  if (prompt.name === 'login') {
    result = { login: { accountId: String(ctx.query.account || 'reader') } };
  } else {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes || {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    result = { consent: { grantId: await grant.save() } };
  }
  // Answers 303 to the authorization endpoint's resume URL itself.
  ctx.respond = false;
  await provider.interactionFinished(ctx.req, ctx.res, result, { mergeWithLastSubmission: true });
});

provider.listen(port, '127.0.0.1', () => {
  console.log(`oidc-provider listening on ${issuer}`);
});
