/**
 * The API reference: Swagger UI (its ES bundle and stylesheet, bundled here, nothing from a
 * CDN) rendering the service's own OpenAPI document. The browser's session cookie goes with
 * "Try it out" requests (same origin), so a signed-in user calls the API as themself.
 */
import SwaggerUIBundle from 'swagger-ui-dist/swagger-ui-es-bundle.js';
import 'swagger-ui-dist/swagger-ui.css';
import './api-reference.css';

const apiBase = document.querySelector<HTMLMetaElement>('meta[name="acs-api-base"]')?.content ?? '';

SwaggerUIBundle({
  url: `${apiBase}/api/openapi.json`,
  dom_id: '#swagger',
  deepLinking: true,
  tryItOutEnabled: true,
  validatorUrl: null,
  // The cookie is sent on same-origin requests; say so explicitly.
  requestInterceptor: (request: { credentials?: string }) => ({ ...request, credentials: 'same-origin' }),
});
