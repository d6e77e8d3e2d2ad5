-- owner: watchdog/db.py
-- What the server says of itself that a sandboxed run must not reach: the
-- folders of its Unix sockets. Only a superuser or a member of
-- pg_read_all_settings may read them: NULL for any other role.

-- name: server_socket_folders :row retry
SELECT CASE WHEN pg_has_role(current_user, 'pg_read_all_settings', 'MEMBER')
            THEN current_setting('unix_socket_directories')
       END AS folders;
