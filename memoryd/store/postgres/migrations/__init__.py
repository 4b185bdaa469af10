"""The PostgreSQL schema's migrations, one module each: plain SQL that never imports live code,
so editing today's modules cannot change yesterday's migrations."""
