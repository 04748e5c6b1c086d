import { describe, expect, it } from 'vitest';
import { connectionOf, parseDockerHosts } from '@acs/adapter-docker';

describe('ACS_DOCKER_HOSTS', () => {
  it('reads engines with their names, limits and TLS directories', () => {
    expect(
      parseDockerHosts(
        'unix:///var/run/docker.sock?name=local&max=10, tcp://10.0.0.5:2376?tls=/etc/acs/b&max=40,unix:///run/two.sock',
        20,
      ),
    ).toEqual([
      { name: 'local', url: 'unix:///var/run/docker.sock', maxRunning: 10 },
      { name: 'tcp://10.0.0.5:2376', url: 'tcp://10.0.0.5:2376', maxRunning: 40, tlsDir: '/etc/acs/b' },
      { name: 'unix:///run/two.sock', url: 'unix:///run/two.sock', maxRunning: 20 },
    ]);
    expect(connectionOf({ name: 'a', url: 'unix:///run/two.sock', maxRunning: 1 })).toEqual({
      socketPath: '/run/two.sock',
    });
    expect(connectionOf({ name: 'b', url: 'tcp://127.0.0.1:2375', maxRunning: 1 })).toEqual({
      host: '127.0.0.1',
      port: 2375,
      protocol: 'http',
    });
  });

  it('says which entry is wrong', () => {
    expect(() => parseDockerHosts('http://engine:2375')).toThrow(
      '"http://engine:2375" is not unix:///path/to.sock or tcp://host:port',
    );
    expect(() => parseDockerHosts('unix:///a.sock?max=lots')).toThrow('max must be a whole number');
    expect(() => parseDockerHosts('unix:///a.sock?tls=/x')).toThrow('tls is for tcp:// engines');
    expect(() => parseDockerHosts('unix:///a.sock?colour=blue')).toThrow('unknown parameter "colour"');
    expect(() => parseDockerHosts('unix:///a.sock?name=x,unix:///b.sock?name=x')).toThrow('two engines are named "x"');
    expect(() => parseDockerHosts(' , ')).toThrow('lists no engine');
  });
});
