/*
 * mpi_rail_check: an MPI program of two ranks that moves verified data the
 * ways MPI over UCX does: tagged send/receive ping-pong of 8 B to 1 MiB
 * (pml ucx: eager and rendezvous) and one-sided puts into a window (osc
 * ucx: UCP RMA), every byte checked. Rank 0 prints the one-way latency per
 * size and "verified: ok"; exit status 0 only when every byte was right.
 * contrib/mpi_check.sh runs it with each rank's UCX on its own rail NIC.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char pattern(size_t k, int i)
{
    return (unsigned char)(k * 7 + (size_t)i * 13 + 1);
}

static int pingpong(int rank, size_t n, int iters, double *us)
{
    unsigned char *buf = malloc(n);
    int bad = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
        if (rank == 0) {
            for (size_t k = 0; k < n; ++k) {
                buf[k] = pattern(k, i);
            }
            MPI_Send(buf, (int)n, MPI_BYTE, 1, i, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)n, MPI_BYTE, 1, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (size_t k = 0; k < n; ++k) {
                bad += buf[k] != (unsigned char)(pattern(k, i) + 1);
            }
        } else {
            MPI_Recv(buf, (int)n, MPI_BYTE, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (size_t k = 0; k < n; ++k) {
                bad += buf[k] != pattern(k, i);
                ++buf[k];
            }
            MPI_Send(buf, (int)n, MPI_BYTE, 0, i, MPI_COMM_WORLD);
        }
    }
    *us = (MPI_Wtime() - t0) / iters / 2 * 1e6;
    free(buf);
    return bad;
}

/* Rank 0 puts a pattern into rank 1's window, rank 1 checks it. */
static int one_sided(int rank, size_t n)
{
    unsigned char *mem;
    MPI_Win win;
    int bad = 0;
    MPI_Win_allocate((MPI_Aint)n, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    memset(mem, 0, n);
    MPI_Win_fence(0, win);
    if (rank == 0) {
        unsigned char *src = malloc(n);
        for (size_t k = 0; k < n; ++k) {
            src[k] = pattern(k, 99);
        }
        MPI_Put(src, (int)n, MPI_BYTE, 1, 0, (int)n, MPI_BYTE, win);
        MPI_Win_fence(0, win);
        free(src);
    } else {
        MPI_Win_fence(0, win);
        for (size_t k = 0; k < n; ++k) {
            bad += mem[k] != pattern(k, 99);
        }
    }
    MPI_Win_free(&win);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) {
            fprintf(stderr, "mpi_rail_check: needs 2 ranks\n");
        }
        MPI_Finalize();
        return 2;
    }
    const int iters = (argc > 1) ? atoi(argv[1]) : 100;
    const size_t sizes[] = {8, 1024, 8192, 65536, 1 << 20};
    int bad = 0;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
        double us;
        bad += pingpong(rank, sizes[s], iters, &us);
        if (rank == 0) {
            printf("pingpong %zu bytes: %.1f us one-way\n", sizes[s], us);
        }
    }
    bad += one_sided(rank, 4 << 20);
    int all;
    MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("verified: %s (%d bad bytes; tagged 8 B - 1 MiB, one-sided 4 MiB)\n",
               (all == 0) ? "ok" : "NO", all);
    }
    MPI_Finalize();
    return (all == 0) ? 0 : 1;
}
