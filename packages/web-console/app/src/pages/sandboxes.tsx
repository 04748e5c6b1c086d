/** Sandboxes: each with its status and spec; pause, resume, delete. */
import { api, unwrap, type SandboxInfo } from '../api.js';
import { Badge, Empty, ErrorBox, formatAge, Loading, useAction, useLoad } from '../ui.js';

export function SandboxesPage() {
  const list = useLoad(() => unwrap(api.GET('/api/v1/sandboxes/search', { params: { query: { limit: 100 } } })), []);
  const act = useAction(async (sandbox: SandboxInfo, action: 'pause' | 'resume' | 'delete') => {
    if (action === 'delete') {
      if (!confirm(`Delete sandbox ${sandbox.id}? Its files are lost.`)) return;
      await unwrap(api.DELETE('/api/v1/sandboxes/{sandbox_id}', { params: { path: { sandbox_id: sandbox.id } } }));
    } else if (action === 'pause') {
      await unwrap(api.POST('/api/v1/sandboxes/{sandbox_id}/pause', { params: { path: { sandbox_id: sandbox.id } } }));
    } else {
      await unwrap(api.POST('/api/v1/sandboxes/{sandbox_id}/resume', { params: { path: { sandbox_id: sandbox.id } } }));
    }
    list.reload();
  });
  return (
    <section class="page sandboxes">
      <div class="page-head">
        <h1>Sandboxes</h1>
        <button type="button" class="secondary" onClick={list.reload} disabled={list.loading}>
          Refresh
        </button>
      </div>
      {act.error !== undefined && <ErrorBox error={act.error} />}
      {list.error !== undefined && <ErrorBox error={list.error} onRetry={list.reload} />}
      {!list.value && !list.error && <Loading what="sandboxes" />}
      {list.value && list.value.items.length === 0 && <Empty>No sandboxes. A conversation starts one.</Empty>}
      {list.value && list.value.items.length > 0 && (
        <table class="list">
          <thead>
            <tr>
              <th>Sandbox</th>
              <th>Status</th>
              <th class="wide">Spec</th>
              <th>Created</th>
              <th>Actions</th>
            </tr>
          </thead>
          <tbody>
            {list.value.items.map((s) => (
              <tr key={s.id} data-sandbox={s.id}>
                <td data-label="Sandbox">
                  <code>{s.id.slice(0, 12)}</code>
                  {s.status_detail && <div class="hint">{s.status_detail}</div>}
                </td>
                <td data-label="Status">
                  <Badge value={s.status} />
                </td>
                <td data-label="Spec" class="wide">
                  {s.sandbox_spec_id}
                </td>
                <td data-label="Created" title={s.created_at}>
                  {formatAge(s.created_at)}
                </td>
                <td data-label="Actions" class="buttons">
                  {s.status === 'RUNNING' && (
                    <button
                      type="button"
                      class="secondary"
                      disabled={act.busy}
                      onClick={() => void act.run(s, 'pause')}
                    >
                      Pause
                    </button>
                  )}
                  {s.status === 'PAUSED' && (
                    <button
                      type="button"
                      class="secondary"
                      disabled={act.busy}
                      onClick={() => void act.run(s, 'resume')}
                    >
                      Resume
                    </button>
                  )}
                  <button type="button" class="danger" disabled={act.busy} onClick={() => void act.run(s, 'delete')}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
