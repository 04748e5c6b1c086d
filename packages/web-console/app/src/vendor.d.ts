declare module 'swagger-ui-dist/swagger-ui-es-bundle.js' {
  /** Swagger UI's ES bundle; see https://swagger.io/docs/open-source-tools/swagger-ui/usage/configuration/ */
  const SwaggerUIBundle: (config: Record<string, unknown>) => unknown;
  export default SwaggerUIBundle;
}
