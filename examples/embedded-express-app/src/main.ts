import { createHostApp } from './app.js';

const port = Number(process.env.PORT ?? 3001);
const { app, service } = createHostApp();
const server = app.listen(port, '127.0.0.1', () => {
  console.log(
    `host app on http://127.0.0.1:${port}; try: curl -H 'Authorization: Bearer alice-session-token' http://127.0.0.1:${port}/agents/api/v1/sandbox-specs/search`,
  );
});
const stop = () => server.close(() => void service.close().then(() => process.exit(0)));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
