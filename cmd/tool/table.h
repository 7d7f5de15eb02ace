/*
 * table: -o table, records as aligned human tables on stdout (PRODUCT 2).
 * Consecutive records of one type make one table with that type's
 * columns (a generic set for other types); cells are one line, cut with
 * "..." so that a table fits 80 columns; a column empty in every row is
 * left out.
 */
#ifndef NYX_TABLE_H
#define NYX_TABLE_H

#include <stdio.h>

#include <jv.h>

/* Print rows (an array of records; borrowed). */
void nyx_table_print(FILE *f, jv rows);

#endif
