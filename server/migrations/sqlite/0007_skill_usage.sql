-- How often each documented REST route and MCP tool is called (/api/skills). Totals since
-- the row was created; the server adds its in-memory counts every few seconds.
CREATE TABLE skill_usage (
    surface        TEXT    NOT NULL,
    name           TEXT    NOT NULL,
    calls          INTEGER NOT NULL,
    errors         INTEGER NOT NULL,
    last_used_ms   INTEGER NOT NULL,
    PRIMARY KEY (surface, name)
);
